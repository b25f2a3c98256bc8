"""SQL of webhooks: the endpoints of each project, their delivery position and state, and the
events each one has still to receive.

Endpoints belong to no single user: these functions run on a system connection (memql_system),
or as the operator; every function that serves one project filters by it here.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from memql.db.events import _EVENT_COLUMNS, _event
from memql.db.pool import Conn
from memql.model import MemoryEvent, Webhook

_COLUMNS = """
    w.id, w.project_id, p.name as project_name, w.url, w.event_types, w.created_by,
    w.created_at, w.acked_cursor, w.last_delivered_at, w.failures, w.last_error,
    w.last_error_at, w.next_attempt_at
"""

# the events an endpoint has still to receive: its project's, after its position, of its types
_PENDING = """
    e.project_id = w.project_id and e.cursor > w.acked_cursor
    and (w.event_types is null or e.type = any(w.event_types))
"""


def _webhook(row: dict[str, Any]) -> Webhook:
    types = row["event_types"]
    return Webhook(
        id=row["id"],
        project_id=row["project_id"],
        project_name=row["project_name"],
        url=row["url"],
        event_types=tuple(types) if types is not None else None,
        created_by=row["created_by"],
        created_at=row["created_at"],
        acked_cursor=int(row["acked_cursor"]),
        last_delivered_at=row["last_delivered_at"],
        failures=int(row["failures"]),
        last_error=row["last_error"],
        last_error_at=row["last_error_at"],
        next_attempt_at=row["next_attempt_at"],
        pending=int(row["pending"]) if row.get("pending") is not None else None,
    )


async def insert_webhook(
    conn: Conn,
    project_id: uuid.UUID,
    url: str,
    event_types: list[str] | None,
    secret: str,
    created_by: str,
) -> Webhook:
    """A new endpoint; it receives the events that follow the end of its project's log now."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"""
            with w as (
                insert into webhook_endpoints
                    (project_id, url, event_types, secret, created_by, acked_cursor)
                select %(project_id)s, %(url)s, %(event_types)s, %(secret)s, %(created_by)s,
                    coalesce((select last from project_cursors
                              where project_id = %(project_id)s), 0)
                returning *
            )
            select {_COLUMNS}, 0 as pending from w join projects p on p.id = w.project_id
            """,
            {
                "project_id": project_id,
                "url": url,
                "event_types": event_types,
                "secret": secret,
                "created_by": created_by,
            },
        )
        row = await cur.fetchone()
    assert row is not None
    await endpoints_changed(conn)
    return _webhook(row)


async def endpoints_changed(conn: Conn) -> None:
    """Tell the deliverer, at commit, that the endpoints changed. The table's trigger says it
    too (006_webhooks.sql; PostgreSQL sends one of the two identical notifications); on Citus
    the trigger is dropped (it would fire on a worker, which the deliverer does not hear) and
    this runs on the coordinator, in the session of the change."""
    await conn.execute("select pg_notify('memql_webhooks', '')")


async def count_webhooks(conn: Conn, project_id: uuid.UUID) -> int:
    cur = await conn.execute(
        "select count(*) from webhook_endpoints where project_id = %s", (project_id,)
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def list_webhooks(
    conn: Conn, project_id: uuid.UUID | None = None, *, pending: bool = False
) -> list[Webhook]:
    """Endpoints (of one project, or all), oldest first; with `pending`, each with the number
    of events it has still to receive."""
    count = f"(select count(*) from memory_events e where {_PENDING})" if pending else "null"
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"""
            select {_COLUMNS}, {count} as pending
            from webhook_endpoints w join projects p on p.id = w.project_id
            where %(project_id)s::uuid is null or w.project_id = %(project_id)s
            order by p.name, w.created_at, w.id
            """,
            {"project_id": project_id},
        )
        return [_webhook(r) for r in await cur.fetchall()]


async def delete_webhook(
    conn: Conn, webhook_id: uuid.UUID, project_id: uuid.UUID | None = None
) -> bool:
    """Remove an endpoint (only of `project_id`, when given); False when there is none."""
    cur = await conn.execute(
        "delete from webhook_endpoints where id = %(id)s"
        " and (%(project_id)s::uuid is null or project_id = %(project_id)s)",
        {"id": webhook_id, "project_id": project_id},
    )
    if cur.rowcount != 1:
        return False
    await endpoints_changed(conn)
    return True


async def delivery_targets(conn: Conn) -> list[tuple[Webhook, str]]:
    """Every endpoint with its signing secret."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"""
            select {_COLUMNS}, w.secret
            from webhook_endpoints w join projects p on p.id = w.project_id
            order by w.created_at, w.id
            """
        )
        return [(_webhook(r), r["secret"]) for r in await cur.fetchall()]


async def pending_events(
    conn: Conn, webhook_id: uuid.UUID, after: int, upto: int, limit: int
) -> list[MemoryEvent]:
    """The endpoint's events in (`after`, `upto`], oldest first, at most `limit`, as the log
    holds them now (an erased memory's events are gone, its `memory.erased` remains)."""
    async with conn.cursor(row_factory=dict_row) as c:
        await c.execute(
            f"""
            select {_EVENT_COLUMNS}
            from webhook_endpoints w
            join memory_events e on e.project_id = w.project_id
            left join memories m on m.project_id = e.project_id and m.id = e.memory_id
            where w.id = %(id)s and e.cursor > %(after)s and e.cursor <= %(upto)s
              and (w.event_types is null or e.type = any(w.event_types))
            order by e.cursor
            limit %(limit)s
            """,
            {"id": webhook_id, "after": after, "upto": upto, "limit": limit},
        )
        return [_event(r) for r in await c.fetchall()]


async def record_delivery(conn: Conn, webhook_id: uuid.UUID, cursor: int) -> None:
    """The receiver acknowledged the event at `cursor`: delivery goes on after it."""
    await conn.execute(
        "update webhook_endpoints set acked_cursor = greatest(acked_cursor, %s),"
        " last_delivered_at = now(), failures = 0, next_attempt_at = null where id = %s",
        (cursor, webhook_id),
    )


async def record_failure(
    conn: Conn, webhook_id: uuid.UUID, error: str, next_attempt_at: datetime
) -> None:
    await conn.execute(
        "update webhook_endpoints set failures = failures + 1, last_error = %s,"
        " last_error_at = now(), next_attempt_at = %s where id = %s",
        (error, next_attempt_at, webhook_id),
    )
