-- Reads that stay within what they need at any size (docs/scale.md): a filtered project recall
-- counts, and when few scans exactly, the shared rows of one category or kind; a context block
-- reads each owner's rows pinned first, then newest; full text serves only the shared scope
-- (a user's own memories are all scored), so its index holds only shared rows.
-- (expires_at included: counting an owner's live rows reads this index alone)
create index memories_owner_category_live
    on memories (project_id, scope, owner_id, category) include (expires_at)
    where invalidated_at is null;
create index memories_owner_kind_live
    on memories (project_id, scope, owner_id, kind) where invalidated_at is null;
create index memories_owner_pinned_live
    on memories (project_id, scope, owner_id, pinned desc, created_at desc, id desc)
    where invalidated_at is null;
drop index memories_fts;
create index memories_project_fts on memories using gin (fts) where scope = 'project';

-- The same row-level security, written so that the planner cannot turn its OR into index scans
-- of both owners: it estimated a shared scope of 100,000 rows at a few hundred (the OR's
-- selectivity multiplied with the query's own owner filter) and chose to read every shared row.
-- A CASE is only a filter; each query's own owner filter picks the index. Same rows visible.
alter policy memories_of_principal on memories
    using (project_id = nullif(current_setting('memql.project_id', true), '')::uuid
           and case when scope = 'project' then true
                    else owner_id = current_setting('memql.user_id', true) end)
    with check (project_id = nullif(current_setting('memql.project_id', true), '')::uuid
           and case when scope = 'project' then true
                    else owner_id = current_setting('memql.user_id', true) end);

-- Under row-level security PostgreSQL uses an operator in an index condition only if it is
-- leakproof (cannot reveal the rows it is given); the full-text match is not marked so, which
-- left the full-text index unused and every shared row tested. Matching a tsvector against a
-- tsquery raises nothing and returns only true or false. Marking it needs a superuser: without
-- one recall still works, and reads the shared scope's rows to match them.
do $$
begin
    alter function ts_match_vq(tsvector, tsquery) leakproof;
exception when insufficient_privilege then
    raise warning 'memql: full-text recall over the shared scope cannot use its index'
        ' (marking ts_match_vq leakproof needs a superuser)';
end $$;
