-- An API key may carry a name (a label for listings) and an expiry. From its expiry on a key is
-- refused exactly as a revoked one is: by the lookup that resolves it, by the probe that confirms
-- a cached answer (db/tenants.py), and by the check that binds every transaction to a principal.
alter table api_keys
    add column name       text check (name is null or length(name) between 1 and 100),
    add column expires_at timestamptz;

-- A changed expiry could revoke a key at once: it notifies `memql_credentials` and raises the
-- credential epoch (013) like a revocation. The name decides nothing and does not notify.
drop trigger api_keys_credentials_changed on api_keys;
create trigger api_keys_credentials_changed
    after update of revoked_at, expires_at, project_id, consumer, key_hash or delete on api_keys
    for each statement execute function memql_notify_credentials();

-- 010's check, with the expiry: a transaction of a principal whose key has expired runs nothing.
create or replace function memql_credential_holds(project uuid, api_key uuid) returns boolean
language plpgsql stable as $$
begin
    if exists (
        select from projects p
        where p.id = project and p.memory_enabled
          and (api_key is null or exists (
              select from api_keys k
              where k.id = api_key and k.project_id = p.id and k.revoked_at is null
                and (k.expires_at is null or k.expires_at > now())))
    ) then
        return true;
    end if;
    raise exception 'the credential was revoked or has expired, or its project has no memory'
        using errcode = 'invalid_authorization_specification';
end $$;
