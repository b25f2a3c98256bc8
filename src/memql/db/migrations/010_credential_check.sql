-- The check that a request's credential still holds (its key live, its project entitled), as a
-- function that raises when it does not (SQLSTATE 28000): the statement that binds a principal
-- to a transaction calls it, so nothing after it in the transaction runs for a stale credential,
-- including statements already sent in the same round trip (a pipelined read stops at the error).
create function memql_credential_holds(project uuid, api_key uuid) returns boolean
language plpgsql stable as $$
begin
    if exists (
        select from projects p
        where p.id = project and p.memory_enabled
          and (api_key is null or exists (
              select from api_keys k
              where k.id = api_key and k.project_id = p.id and k.revoked_at is null))
    ) then
        return true;
    end if;
    raise exception 'the credential was revoked or its project has no memory'
        using errcode = 'invalid_authorization_specification';
end $$;
