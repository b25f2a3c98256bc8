-- How many memories each owner (a project's shared scope, or one user) holds that are not
-- retired or superseded, kept by the writes themselves: a context block's "N more omitted" and
-- a list's totalCount read one row instead of counting a whole shared scope. Memories that have
-- expired without being invalidated are still in `live`; readers subtract them through
-- memories_owner_expiring (only rows with an expiry are in it).

-- no write may slip between the counters' start and the triggers that keep them
lock table memories in share row exclusive mode;

create table memory_counts (
    project_id uuid   not null references projects (id) on delete cascade,
    scope      text   not null,
    owner_id   text   not null,
    live       bigint not null,
    primary key (project_id, scope, owner_id)
);

create index memories_owner_expiring
    on memories (project_id, scope, owner_id, expires_at)
    where invalidated_at is null and expires_at is not null;

-- Each statement's changes, summed per owner. The functions run as their owner (security
-- definer): request roles only read the counters.
create function memory_counts_added() returns trigger
language plpgsql security definer set search_path = public as $$
begin
    insert into memory_counts as c (project_id, scope, owner_id, live)
    select project_id, scope, owner_id, count(*) from added
    where invalidated_at is null group by 1, 2, 3
    on conflict (project_id, scope, owner_id) do update set live = c.live + excluded.live;
    return null;
end $$;

create function memory_counts_removed() returns trigger
language plpgsql security definer set search_path = public as $$
begin
    -- an update only: a project being deleted takes its counters with it
    update memory_counts c set live = c.live - r.n
    from (select project_id, scope, owner_id, count(*) as n from removed
          where invalidated_at is null group by 1, 2, 3) r
    where (c.project_id, c.scope, c.owner_id) = (r.project_id, r.scope, r.owner_id);
    return null;
end $$;

create function memory_counts_changed() returns trigger
language plpgsql security definer set search_path = public as $$
begin
    insert into memory_counts as c (project_id, scope, owner_id, live)
    select project_id, scope, owner_id, sum(n) from (
        select project_id, scope, owner_id, 1 as n from after_rows where invalidated_at is null
        union all
        select project_id, scope, owner_id, -1 from before_rows where invalidated_at is null
    ) d
    group by 1, 2, 3 having sum(n) <> 0
    on conflict (project_id, scope, owner_id) do update set live = c.live + excluded.live;
    return null;
end $$;

create trigger memory_counts_insert after insert on memories
    referencing new table as added for each statement execute function memory_counts_added();
create trigger memory_counts_delete after delete on memories
    referencing old table as removed for each statement execute function memory_counts_removed();
create trigger memory_counts_update after update on memories
    referencing old table as before_rows new table as after_rows
    for each statement execute function memory_counts_changed();

insert into memory_counts (project_id, scope, owner_id, live)
select project_id, scope, owner_id, count(*) from memories
where invalidated_at is null group by 1, 2, 3;

grant select on memory_counts to memql_app, memql_system;
alter table memory_counts enable row level security;
create policy memory_counts_of_principal on memory_counts to memql_app
    using (project_id = nullif(current_setting('memql.project_id', true), '')::uuid
           and case when scope = 'project' then true
                    else owner_id = current_setting('memql.user_id', true) end);
create policy memory_counts_system on memory_counts to memql_system using (true);
