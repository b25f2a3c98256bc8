-- A write's notification names its project and the highest cursor it wrote there
-- (`<project id>:<cursor>`), once per statement instead of once per event: the relay and the
-- deliverer then read only the projects that moved, not every project's counter on each wake.
drop trigger memory_events_notify on memory_events;
drop function memql_notify_event();

create function memql_notify_events() returns trigger language plpgsql as $$
declare
    moved record;
begin
    for moved in select project_id, max(cursor) as last from written group by project_id loop
        perform pg_notify('memql_events', moved.project_id::text || ':' || moved.last::text);
    end loop;
    return null;
end;
$$;

create trigger memory_events_notify
    after insert on memory_events
    referencing new table as written
    for each statement execute function memql_notify_events();
