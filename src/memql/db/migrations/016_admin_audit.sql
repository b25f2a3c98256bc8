-- The admin audit log: every change to tenants (a project created, entitled, disabled, deleted
-- or given browser-token trust; a key created or revoked; a webhook added or removed), who made
-- it and through what (`cli`: the command line, as its OS user; `admin-api`: an operator of
-- MEMQL_ADMIN_TOKENS, by name). Each record is written in the transaction of its change
-- (service/admin.py): a change cannot commit without its record, and a refused one leaves none.
-- No secret is ever recorded (a key, a signing secret, an HS256 secret). No foreign key: a
-- record outlives its project, which it names as it was. Only the schema's owner reads or writes
-- it; the request roles have no grant on it.
create table admin_audit (
    id           bigint generated always as identity primary key,
    at           timestamptz not null default now(),
    actor        text not null check (length(actor) between 1 and 200),
    via          text not null check (via in ('cli', 'admin-api')),
    action       text not null,
    project_id   uuid,
    project_name text,
    target_id    uuid,
    detail       jsonb not null default '{}'
);
create index admin_audit_project on admin_audit (project_name, id);
