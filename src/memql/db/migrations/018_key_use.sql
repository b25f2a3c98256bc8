-- A key's use (`last_used_at`, at most once a minute) is marked by a function that runs as the
-- schema's owner, not by the request role's own UPDATE: on Citus `api_keys` is a reference
-- table, written on every node as the current role, and the request role may not lock the
-- projects it refers to there. The same row changes as before.
create function memql_key_used(key uuid) returns void
language sql security definer set search_path = pg_catalog, public as $$
    update api_keys set last_used_at = now()
    where id = key and (last_used_at is null or last_used_at < now() - interval '1 minute')
$$;
revoke execute on function memql_key_used(uuid) from public;
grant execute on function memql_key_used(uuid) to memql_app;
