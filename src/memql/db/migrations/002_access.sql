-- Browser credentials (JWT per project) and row-level security as a second wall.

alter table projects
    add column jwt_issuer       text unique,
    add column jwt_audience     text,
    add column jwt_hs256_secret text,
    add column jwt_jwks_url     text,
    add constraint projects_jwt_config check (
        (jwt_issuer is null and jwt_audience is null and jwt_hs256_secret is null
            and jwt_jwks_url is null)
        or (jwt_issuer is not null and jwt_audience is not null
            and (jwt_hs256_secret is null) <> (jwt_jwks_url is null))
    );

-- memql_app: what request-path connections become (SET ROLE); it owns nothing, so row-level
-- security always applies to it. memql_system: for work on behalf of no single user (relay,
-- migrations of embeddings, export); it sees every row.
do $$
begin
    if not exists (select from pg_roles where rolname = 'memql_app') then
        create role memql_app nologin;
    end if;
    if not exists (select from pg_roles where rolname = 'memql_system') then
        create role memql_system nologin;
    end if;
end $$;
grant memql_app, memql_system to current_user;

grant usage on schema public to memql_app, memql_system;
grant select on projects, embedding_space to memql_app;
grant select, update (last_used_at) on api_keys to memql_app;
grant select, insert, update, delete on memories, memory_events to memql_app;
grant select, insert, update, delete on memories, memory_events to memql_system;
grant select on projects, api_keys to memql_system;
grant select, insert, update on embedding_space to memql_system;
grant usage on all sequences in schema public to memql_app, memql_system;

alter table memories enable row level security;
alter table memories force row level security;
alter table memory_events enable row level security;
alter table memory_events force row level security;

-- A request sees its project's shared rows and its own user's rows, nothing else, whatever
-- the query says. The values are set per transaction with set_config(..., true).
create policy memories_of_principal on memories to memql_app
    using (project_id = nullif(current_setting('memql.project_id', true), '')::uuid
           and (scope = 'project' or owner_id = current_setting('memql.user_id', true)))
    with check (project_id = nullif(current_setting('memql.project_id', true), '')::uuid
           and (scope = 'project' or owner_id = current_setting('memql.user_id', true)));
create policy memory_events_of_principal on memory_events to memql_app
    using (project_id = nullif(current_setting('memql.project_id', true), '')::uuid
           and (scope = 'project' or owner_id = current_setting('memql.user_id', true)))
    with check (project_id = nullif(current_setting('memql.project_id', true), '')::uuid
           and (scope = 'project' or owner_id = current_setting('memql.user_id', true)));

create policy memories_system on memories to memql_system using (true) with check (true);
create policy memory_events_system on memory_events to memql_system using (true) with check (true);
