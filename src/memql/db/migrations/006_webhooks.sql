-- Webhooks: HTTP endpoints of a project that receive its memory events, in cursor order, from
-- the event log. Each endpoint keeps its own position (`acked_cursor`: the last event its
-- receiver acknowledged), so delivery resumes there after a restart or an outage.
create table webhook_endpoints (
    id                uuid primary key default gen_random_uuid(),
    project_id        uuid not null references projects (id) on delete cascade,
    url               text not null check (length(url) between 1 and 2048),
    -- null: every event type
    event_types       text[],
    -- the HMAC key; it must be readable to sign, so only memql_system may select it
    secret            text not null,
    created_by        text not null,
    created_at        timestamptz not null default now(),
    acked_cursor      bigint not null,
    last_delivered_at timestamptz,
    -- failures since the last acknowledged delivery; reset to 0 by a success
    failures          integer not null default 0,
    last_error        text,
    last_error_at     timestamptz,
    next_attempt_at   timestamptz
);
create index webhook_endpoints_project on webhook_endpoints (project_id);

-- an endpoint reads its project's events in cursor order
create index memory_events_project_cursor on memory_events (project_id, cursor);

-- the deliverer reloads its endpoints when they change
create function memql_notify_webhooks() returns trigger language plpgsql as $$
begin
    perform pg_notify('memql_webhooks', '');
    return null;
end;
$$;

create trigger webhook_endpoints_notify
    after insert or delete on webhook_endpoints
    for each statement execute function memql_notify_webhooks();

grant select, insert, update, delete on webhook_endpoints to memql_system;
