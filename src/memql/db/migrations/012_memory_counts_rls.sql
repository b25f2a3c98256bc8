-- memory_counts holds every project's user ids and counts: like the other tables that hold a
-- user's data it forces row-level security, so even its owner (a deployment whose DATABASE_URL
-- role is not a superuser) reads it through a policy. The counters' trigger functions run as
-- that owner (security definer); they, and only they, may read and write every row: the
-- owner's policy holds inside a trigger and nowhere else.
alter table memory_counts force row level security;
create policy memory_counts_triggers on memory_counts to current_user
    using (pg_trigger_depth() > 0) with check (pg_trigger_depth() > 0);
