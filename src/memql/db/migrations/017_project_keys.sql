-- Every row of a project's data is keyed by its project: a memory by (project_id, id), a
-- webhook endpoint by (project_id, id), a memory's pointers to its other versions by the
-- project as well. On one PostgreSQL this changes nothing a query sees (ids are random UUIDs
-- and a chain never leaves its project); on Citus it is what lets every table be distributed
-- by project (docs/scale.md), where a unique key must hold the distribution column.
--
-- The pointers lose `on delete set null`: Citus refuses it on a key that holds the
-- distribution column, and no delete needs it, since an erasure removes a whole chain
-- (every version, in one statement) and a project's deletion all of its rows.
alter table memories
    drop constraint memories_supersedes_fkey,
    drop constraint memories_superseded_by_fkey;
alter table memories drop constraint memories_pkey;
alter table memories add primary key (project_id, id);
alter table memories
    add constraint memories_supersedes_fkey foreign key (project_id, supersedes)
        references memories (project_id, id) deferrable initially deferred,
    add constraint memories_superseded_by_fkey foreign key (project_id, superseded_by)
        references memories (project_id, id) deferrable initially deferred;

alter table webhook_endpoints drop constraint webhook_endpoints_pkey;
alter table webhook_endpoints add primary key (project_id, id);
