-- memql core schema: projects, API keys, memories (with their versions) and the event log.
create extension if not exists vector;

create table projects (
    id            uuid primary key default gen_random_uuid(),
    name          text not null unique check (length(name) between 1 and 100),
    -- entitlement: memory exists for a project only while this is true
    memory_enabled boolean not null default true,
    created_at    timestamptz not null default now()
);

create table api_keys (
    id            uuid primary key default gen_random_uuid(),
    project_id    uuid not null references projects (id) on delete cascade,
    -- the first characters of the key, shown in listings; the key itself is never stored
    prefix        text not null,
    key_hash      bytea not null unique,
    consumer      text not null check (consumer in ('agent', 'client')),
    created_at    timestamptz not null default now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);

-- The vector space every stored embedding lives in (one row). The service refuses to start
-- when the configured embedder disagrees with it.
create table embedding_space (
    singleton     boolean primary key default true check (singleton),
    model         text not null,
    dimensions    integer not null check (dimensions > 0),
    recorded_at   timestamptz not null default now()
);

create table memories (
    id                  uuid primary key,
    project_id          uuid not null references projects (id) on delete cascade,
    scope               text not null check (scope in ('user', 'project')),
    -- the app user for scope 'user'; '' for scope 'project' (owned by the project)
    owner_id            text not null,
    kind                text not null check (kind in ('topical', 'episodic', 'operational')),
    content             text not null check (length(content) between 1 and 65536),
    key                 text,
    category            text not null default 'general',
    pinned              boolean not null default false,
    source_thread_ids   text[] not null default '{}',
    source              jsonb,
    created_by          text not null,
    created_at          timestamptz not null default now(),
    updated_at          timestamptz not null default now(),
    expires_at          timestamptz,
    invalidated_at      timestamptz,
    invalidation_reason text check (invalidation_reason in ('retired', 'superseded', 'expired')),
    -- deferred: a supersession points the old and new versions at each other in one transaction
    supersedes          uuid references memories (id) on delete set null
                            deferrable initially deferred,
    superseded_by       uuid references memories (id) on delete set null
                            deferrable initially deferred,
    embedding_model     text not null,
    -- no fixed dimension: the space is recorded per row and in embedding_space
    embedding           vector not null,
    fts                 tsvector generated always as (to_tsvector('english', content)) stored,
    check ((scope = 'project') = (owner_id = '')),
    check ((invalidated_at is null) = (invalidation_reason is null))
);

-- a key names one live memory of an owner and scope
create unique index memories_live_key
    on memories (project_id, scope, owner_id, key)
    where invalidated_at is null and key is not null;

-- every read is per owner: exact scans over one owner's rows stay exact under filters
create index memories_owner_live
    on memories (project_id, scope, owner_id, created_at desc, id desc)
    where invalidated_at is null;
create index memories_owner_all
    on memories (project_id, scope, owner_id, created_at desc, id desc);
create index memories_fts on memories using gin (fts);

create table memory_events (
    cursor       bigint generated always as identity primary key,
    project_id   uuid not null references projects (id) on delete cascade,
    scope        text not null check (scope in ('user', 'project')),
    owner_id     text not null,
    type         text not null check (type in ('memory.created', 'memory.absorbed',
                     'memory.superseded', 'memory.retired', 'memory.restored', 'memory.erased')),
    -- no foreign key: erasure removes the memory but keeps the fact that it was erased
    memory_id    uuid,
    actor_id     text not null,
    payload      jsonb not null default '{}',
    occurred_at  timestamptz not null default now()
);
create index memory_events_owner on memory_events (project_id, scope, owner_id, cursor);
create index memory_events_memory on memory_events (memory_id);
