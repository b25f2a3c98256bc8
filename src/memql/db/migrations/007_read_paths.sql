-- Reads that stay within what they need at any size (docs/scale.md): a filtered project recall
-- counts, and when few scans exactly, the shared rows of one category or kind; a context block
-- reads each owner's rows pinned first, then newest; full text serves only the shared scope
-- (a user's own memories are all scored), so its index holds only shared rows.
create index memories_owner_category_live
    on memories (project_id, scope, owner_id, category) where invalidated_at is null;
create index memories_owner_kind_live
    on memories (project_id, scope, owner_id, kind) where invalidated_at is null;
create index memories_owner_pinned_live
    on memories (project_id, scope, owner_id, pinned desc, created_at desc, id desc)
    where invalidated_at is null;
drop index memories_fts;
create index memories_project_fts on memories using gin (fts) where scope = 'project';
