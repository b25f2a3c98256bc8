-- Realtime: a NOTIFY per event (the cursor only: payloads are capped at 8000 bytes) and the
-- relay's position, shared by every instance so a new leader resumes where the last one stopped.

create function memql_notify_event() returns trigger language plpgsql as $$
begin
    perform pg_notify('memql_events', new.cursor::text);
    return null;
end;
$$;

create trigger memory_events_notify
    after insert on memory_events
    for each row execute function memql_notify_event();

-- `published`: every event up to it reached the broadcast. `horizon`: the relay may have sent
-- events up to it; every event at or below it is final (committed, or never will be), so a
-- replay that reads up to `horizon` and then listens live misses nothing.
create table realtime_relay (
    singleton   boolean primary key default true check (singleton),
    published   bigint not null,
    horizon     bigint not null,
    leader      text,
    updated_at  timestamptz not null default now(),
    check (published <= horizon)
);
insert into realtime_relay (published, horizon)
select coalesce(max(cursor), 0), coalesce(max(cursor), 0) from memory_events;

-- subscribers read the horizon in their own (memql_app) transaction; the relay moves it
grant select on realtime_relay to memql_app;
grant select, update on realtime_relay to memql_system;
