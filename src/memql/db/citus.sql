-- memql's tables on Citus (run by `memql migrate` after the migrations, once, on a Citus
-- coordinator; db/migrate.py). Every table of a project's data is distributed by project_id
-- and co-located, so a project's rows, events and counters live in one shard and every
-- request-path transaction runs on one worker and commits in one phase (the events' NOTIFY
-- is legal only there). The tables every request reads are reference tables (a copy on
-- every node). Tables only the coordinator uses stay local to it.

-- memql's triggers (counters, notifications) run on the shards
set local citus.enable_unsafe_triggers = on;

-- A table that a foreign key to a reference table points from becomes a Citus local table,
-- which can no longer be distributed; and rows copied into the shards under a deferred key
-- (a memory's versions) would leave checks pending that stop the next ALTER TABLE. So every
-- foreign key of the tables to distribute is taken off first and put back (checked then,
-- once) when every table is in place.
create temporary table memql_project_keys on commit drop as
select c.conrelid::regclass as tbl, c.conname as name, pg_get_constraintdef(c.oid) as def
from pg_constraint c
where c.contype = 'f' and c.conrelid in (
    'memories'::regclass, 'memory_events'::regclass, 'memory_counts'::regclass,
    'project_cursors'::regclass, 'relay_positions'::regclass, 'webhook_endpoints'::regclass)
order by c.conrelid = c.confrelid, c.conname;

do $$
declare
    k record;
begin
    for k in select * from memql_project_keys loop
        execute format('alter table %s drop constraint %I', k.tbl, k.name);
    end loop;
end $$;

-- Credential changes raise the epoch and notify on the coordinator only, in the session that
-- made them (where memql listens; a NOTIFY on a worker would stop the change's two-phase
-- commit): the triggers fire on every node's copy of a reference table.
create or replace function memql_notify_credentials() returns trigger
language plpgsql security definer set search_path = pg_catalog, public as $$
begin
    if not citus_is_coordinator() then
        return null;
    end if;
    update credential_epoch set epoch = epoch + 1;
    perform pg_notify('memql_credentials', tg_table_name);
    return null;
end;
$$;

-- The deliverer hears of changed endpoints from the change's own session, on the coordinator
-- (db/webhooks.py): on a worker this trigger's NOTIFY would go unheard, and would stop a
-- project's deletion (which reaches every worker, so commits in two phases).
drop trigger webhook_endpoints_notify on webhook_endpoints;

select create_reference_table('projects');
select create_reference_table('api_keys');
select create_reference_table('embedding_space');

-- Rows already here (a single-node installation moved onto the cluster: docs/scale.md) are
-- copied into the shards; their counters and events were counted and notified when they were
-- written, so the tables' triggers are taken off for the copy and put back after it.
create temporary table memql_triggers on commit drop as
select t.tgrelid::regclass as tbl, t.tgname as name, pg_get_triggerdef(t.oid) as def
from pg_trigger t
where t.tgrelid in ('memories'::regclass, 'memory_events'::regclass) and not t.tgisinternal;

do $$
declare
    t record;
begin
    for t in select * from memql_triggers loop
        execute format('drop trigger %I on %s', t.name, t.tbl);
    end loop;
end $$;

select create_distributed_table('memories', 'project_id');
select create_distributed_table('memory_events', 'project_id', colocate_with => 'memories');
select create_distributed_table('memory_counts', 'project_id', colocate_with => 'memories');
select create_distributed_table('project_cursors', 'project_id', colocate_with => 'memories');
select create_distributed_table('relay_positions', 'project_id', colocate_with => 'memories');
select create_distributed_table('webhook_endpoints', 'project_id', colocate_with => 'memories');

do $$
declare
    t record;
begin
    for t in select * from memql_triggers loop
        execute t.def;
    end loop;
end $$;

do $$
declare
    k record;
begin
    for k in select * from memql_project_keys loop
        execute format('alter table %s add constraint %I %s', k.tbl, k.name, k.def);
    end loop;
end $$;

-- The owner counters (009_owner_counts.sql) are kept by statement triggers on `memories`,
-- which run on its shards, on the workers. There they write the co-located shard of
-- `memory_counts` (the same hash range, so on the same node) by its name: through the
-- distributed table Citus would plan the statement again and lose the trigger's transition
-- table. The statement is the same as on one PostgreSQL.
create or replace function memql_counts_shard(memories_shard text) returns text
language sql stable set search_path = pg_catalog, public as $$
    select 'memory_counts_' || c.shardid
    from pg_dist_shard m
    join pg_dist_shard c on c.logicalrelid = 'memory_counts'::regclass
        and c.shardminvalue = m.shardminvalue
    where m.shardid = substring(memories_shard from '_(\d+)$')::bigint
$$;

create or replace function memory_counts_added() returns trigger
language plpgsql security definer set search_path = public as $$
begin
    execute format($sql$
        insert into %I as c (project_id, scope, owner_id, live)
        select project_id, scope, owner_id, count(*) from added
        where invalidated_at is null group by 1, 2, 3
        on conflict (project_id, scope, owner_id) do update set live = c.live + excluded.live
    $sql$, memql_counts_shard(tg_table_name));
    return null;
end $$;

create or replace function memory_counts_removed() returns trigger
language plpgsql security definer set search_path = public as $$
begin
    execute format($sql$
        update %I c set live = c.live - r.n
        from (select project_id, scope, owner_id, count(*) as n from removed
              where invalidated_at is null group by 1, 2, 3) r
        where (c.project_id, c.scope, c.owner_id) = (r.project_id, r.scope, r.owner_id)
    $sql$, memql_counts_shard(tg_table_name));
    return null;
end $$;

create or replace function memory_counts_changed() returns trigger
language plpgsql security definer set search_path = public as $$
begin
    execute format($sql$
        insert into %I as c (project_id, scope, owner_id, live)
        select project_id, scope, owner_id, sum(n) from (
            select project_id, scope, owner_id, 1 as n from after_rows
            where invalidated_at is null
            union all
            select project_id, scope, owner_id, -1 from before_rows where invalidated_at is null
        ) d
        group by 1, 2, 3 having sum(n) <> 0
        on conflict (project_id, scope, owner_id) do update set live = c.live + excluded.live
    $sql$, memql_counts_shard(tg_table_name));
    return null;
end $$;

-- Citus opens its connections to the workers as the session's current role: memql's roles
-- (002_access.sql) log in there. The workers' authentication decides who may (docs/scale.md).
alter role memql_app login;
alter role memql_system login;

-- 008_read_paths.sql's full-text operator, leakproof on the workers too, where the shards'
-- indexes are used (ALTER FUNCTION is not propagated); a failure there (no superuser) only
-- leaves full-text recall over the shared scope reading its rows
select run_command_on_workers(
    $$alter function ts_match_vq(tsvector, tsquery) leakproof$$);
