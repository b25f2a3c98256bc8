-- Servers keep resolved credentials in memory (access/cache.py). A change that could revoke one
-- (a key revoked, moved or deleted; a project's entitlement, browser-token trust or existence)
-- tells every instance to forget them. `last_used_at` writes do not notify.
create function memql_notify_credentials() returns trigger language plpgsql as $$
begin
    perform pg_notify('memql_credentials', tg_table_name);
    return null;
end;
$$;

create trigger api_keys_credentials_changed
    after update of revoked_at, project_id, consumer, key_hash or delete on api_keys
    for each statement execute function memql_notify_credentials();

create trigger projects_credentials_changed
    after update or delete on projects
    for each statement execute function memql_notify_credentials();
