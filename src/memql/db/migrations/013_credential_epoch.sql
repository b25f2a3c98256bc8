-- Open streams check that a credential still holds before each delivery, without a lookup per
-- event: a change that could revoke a credential (the same changes that notify
-- `memql_credentials`, 007) also raises one counter, the credential epoch, in its own
-- transaction. A stream delivers an event only once its credentials were confirmed at an epoch
-- read after the event had committed (realtime/recheck.py): a revocation that committed before
-- the event is then reflected in the confirmation, whatever order the notifications arrive in.
create table credential_epoch (
    one boolean primary key default true check (one),
    epoch bigint not null
);
insert into credential_epoch (epoch) values (0);
grant select on credential_epoch to memql_app, memql_system;

-- security definer: whoever may revoke a key or disable a project raises the epoch, without a
-- grant of their own on the counter
create or replace function memql_notify_credentials() returns trigger
language plpgsql security definer set search_path = pg_catalog, public as $$
begin
    update credential_epoch set epoch = epoch + 1;
    perform pg_notify('memql_credentials', tg_table_name);
    return null;
end;
$$;
