-- The event log counts per project. Each write transaction draws its events' cursors from its
-- project's row of `project_cursors`, as its last statement: the row lock makes the next drawer
-- of the project wait until this transaction has ended, so a project's cursors commit in
-- order, without gaps (an abort rolls the counter back with the event). Every event up to a
-- project's committed `last` is therefore final: no transaction-id snapshot, lock-table or
-- sequence reasoning is needed to decide what may be published.

-- no event may be drawn from the global sequence while the counters start
lock table memory_events in exclusive mode;

create table project_cursors (
    project_id uuid   primary key references projects (id) on delete cascade,
    last       bigint not null
);

-- Cursors that clients hold stay valid: every one of them (an event's, a viewer's
-- `eventCursor`, a webhook's `acked_cursor`) is at most the highest cursor the global sequence
-- ever issued, in any project. Every project's counter starts there, so each project's next
-- cursor is above anything a client of it may hold, and a resume from an old cursor replays
-- the project's old events above it (they keep their cursors), then the new ones.
insert into project_cursors (project_id, last)
select p.id, greatest(
    coalesce(pg_sequence_last_value(pg_get_serial_sequence('memory_events', 'cursor')::regclass), 0),
    coalesce((select max(cursor) from memory_events), 0))
from projects p;

alter table memory_events alter column cursor drop identity;
alter table memory_events drop constraint memory_events_pkey;
alter table memory_events add primary key (project_id, cursor);
-- the primary key's index now serves what this one did
drop index memory_events_project_cursor;

-- Where the shared relay stands, per project: every event of the project up to `published`
-- reached the broadcast, so a new leader resumes there. The old single position carries over:
-- every existing event above it has a cursor above it in its own project too.
create table relay_positions (
    project_id uuid   primary key references projects (id) on delete cascade,
    published  bigint not null
);
insert into relay_positions (project_id, published)
select p.id, r.published from projects p cross join realtime_relay r;
drop table realtime_relay;

grant select, insert, update on project_cursors to memql_app, memql_system;
grant select, insert, update on relay_positions to memql_system;
alter table project_cursors enable row level security;
alter table project_cursors force row level security;
create policy project_cursors_of_principal on project_cursors to memql_app
    using (project_id = nullif(current_setting('memql.project_id', true), '')::uuid)
    with check (project_id = nullif(current_setting('memql.project_id', true), '')::uuid);
create policy project_cursors_system on project_cursors to memql_system
    using (true) with check (true);
