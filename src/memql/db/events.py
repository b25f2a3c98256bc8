"""SQL of the event log: each write's events (the last statement of the write's transaction,
their cursors drawn from the project's counter), reading the log in cursor order per project,
and the relay's positions.

The relay's reads are system-level (every tenant's events) and run on its own connection; a
subscriber's replay runs in the subscriber's principal-bound transaction, filtered here by owner.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import Notify
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memql.db.pool import Conn
from memql.db.rows import MEMORY_COLUMNS, memory_from_row
from memql.model import EventType, MemoryEvent, Principal, Scope

# held (session level) by the one relay that publishes; a constant shared by every instance
RELAY_LOCK = 0x6D656D716C_01
NOTIFY_CHANNEL = "memql_events"

# the log's `occurred_at` column (001_core.sql, `default now()`) is an event's `changed_at`: the
# column keeps its first name, which a rename would take from instances still reading it
_EVENT_COLUMNS = f"""
    e.cursor as e_cursor, e.project_id as e_project_id, e.scope as e_scope,
    e.owner_id as e_owner_id, e.type as e_type, e.memory_id as e_memory_id,
    e.actor_id as e_actor_id, e.occurred_at as e_changed_at, {MEMORY_COLUMNS}
"""


# The credential epoch (013_credential_epoch.sql), read in the statement that reads events: a
# change to credentials that committed before an event is in every snapshot that sees the
# event, so the epoch read beside the event counts it. A stream delivers the event only on
# credentials confirmed at that epoch or later (realtime/recheck.py).
_EPOCH = "(select epoch from credential_epoch)"


@dataclass(frozen=True)
class Page:
    """Events read in one statement, and the credential epoch in that statement's snapshot
    (None when no event was read)."""

    events: list[MemoryEvent]
    epoch: int | None


def _event(row: dict[str, Any]) -> MemoryEvent:
    return MemoryEvent(
        cursor=int(row["e_cursor"]),
        project_id=row["e_project_id"],
        scope=Scope(row["e_scope"]),
        owner_id=row["e_owner_id"],
        type=EventType(row["e_type"]),
        memory_id=row["e_memory_id"],
        actor_id=row["e_actor_id"],
        changed_at=row["e_changed_at"],
        memory=memory_from_row(row) if row["id"] is not None else None,
    )


async def replay(
    conn: Conn,
    principal: Principal,
    scopes: Sequence[Scope],
    after: int,
    upto: int,
    limit: int,
) -> Page:
    """The principal's events in (`after`, `upto`], oldest first, at most `limit`, with the
    credential epoch of the statement's snapshot (see `Page`)."""
    async with conn.cursor(row_factory=dict_row) as c:
        await c.execute(
            f"""
            select {_EVENT_COLUMNS}, {_EPOCH} as credential_epoch
            from memory_events e
            left join memories m on m.project_id = e.project_id and m.id = e.memory_id
            where e.project_id = %(project_id)s and (
                    (e.scope = 'user' and e.owner_id = %(user_id)s and 'user' = any(%(scopes)s))
                    or (e.scope = 'project' and 'project' = any(%(scopes)s)))
              and e.cursor > %(after)s and e.cursor <= %(upto)s
            order by e.cursor
            limit %(limit)s
            """,
            {
                "project_id": principal.project_id,
                "user_id": principal.user_id,
                "scopes": [s.value for s in scopes],
                "after": after,
                "upto": upto,
                "limit": limit,
            },
        )
        rows = await c.fetchall()
    return Page([_event(r) for r in rows], int(rows[0]["credential_epoch"]) if rows else None)


async def horizon(conn: Conn, project_id: uuid.UUID) -> int:
    """The project's committed counter: every event of the project up to it is final (it has
    committed, or was erased since), and every later one commits after this read."""
    cur = await conn.execute(
        "select coalesce((select last from project_cursors where project_id = %s), 0)",
        (project_id,),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def counters(
    conn: Conn, projects: Collection[uuid.UUID] | None = None
) -> dict[uuid.UUID, int]:
    """The committed counter of each of `projects` that has one, or of every project (system
    connections only)."""
    if projects is None:
        cur = await conn.execute("select project_id, last from project_cursors")
    else:
        cur = await conn.execute(
            "select project_id, last from project_cursors where project_id = any(%s)",
            (list(projects),),
        )
    return {row[0]: int(row[1]) for row in await cur.fetchall()}


@dataclass(frozen=True)
class Committed:
    # in order within each project
    events: list[MemoryEvent]
    # where each project read now stands: every event of it up to there is in `events` or
    # was read before
    positions: dict[uuid.UUID, int]
    # the read stopped at its limit: more may be waiting
    full: bool
    # the credential epoch in the read's snapshot (None when nothing was read)
    epoch: int | None = None


async def read_committed(
    conn: Conn,
    positions: dict[uuid.UUID, int],
    limit: int,
    projects: Collection[uuid.UUID] | None = None,
    ranges: Sequence[tuple[int, int]] | None = None,
) -> Committed:
    """The committed events above each project's position (0 for a project not in
    `positions`), at most `limit`, in cursor order within each project; of `projects` only,
    or of every project; on Citus, with `ranges`, only of the projects whose hash
    (`worker_hash`) falls in one of them (the shards of one worker group, `db.cluster`).

    One statement, so one snapshot: a project's counter and its events are read together, and
    every event up to a committed counter has committed (its drawer held the counter's row
    until it ended); the credential epoch is read in the same snapshot. `conn` is a system
    connection.
    """
    only = None if projects is None else list(projects)
    known = list(positions)
    in_ranges = (
        ""
        if ranges is None
        else """
              and exists (select from unnest(%(lows)s::int[], %(highs)s::int[]) r (low, high)
                          where worker_hash(c.project_id) between r.low and r.high)"""
    )
    async with conn.cursor(row_factory=dict_row) as c:
        await c.execute(
            f"""
            select c.project_id as c_project_id, c.last as c_last, {_EVENT_COLUMNS},
                {_EPOCH} as credential_epoch
            from project_cursors c
            left join unnest(%(projects)s::uuid[], %(after)s::bigint[]) as p (project_id, after)
                on p.project_id = c.project_id
            left join lateral (
                select * from memory_events e
                where e.project_id = c.project_id
                  and e.cursor > coalesce(p.after, 0) and e.cursor <= c.last
                order by e.cursor limit %(limit)s
            ) e on true
            left join memories m on m.project_id = e.project_id and m.id = e.memory_id
            where c.last > coalesce(p.after, 0)
              and (%(every)s or c.project_id = any(%(only)s::uuid[])){in_ranges}
            order by c.project_id, e.cursor
            limit %(limit)s
            """,
            {
                "projects": known,
                "after": [positions[p] for p in known],
                "limit": limit,
                "every": only is None,
                "only": only or [],
                "lows": [low for low, _ in ranges or ()],
                "highs": [high for _, high in ranges or ()],
            },
        )
        rows = await c.fetchall()
    full = len(rows) == limit
    events: list[MemoryEvent] = []
    moved: dict[uuid.UUID, int] = {}
    for r in rows:
        moved[r["c_project_id"]] = int(r["c_last"])
        if r["e_cursor"] is not None:
            events.append(_event(r))
    if full and rows[-1]["e_cursor"] is not None:
        # the last project read may have more events beyond the limit
        moved[rows[-1]["c_project_id"]] = int(rows[-1]["e_cursor"])
    epoch = int(rows[0]["credential_epoch"]) if rows else None
    return Committed(events, moved, full, epoch)


async def relay_positions(conn: Conn) -> dict[uuid.UUID, int]:
    """Where the shared relay stands, per project."""
    cur = await conn.execute("select project_id, published from relay_positions")
    return {row[0]: int(row[1]) for row in await cur.fetchall()}


async def mark_published(conn: Conn, positions: dict[uuid.UUID, int]) -> None:
    """Every event of each project up to its position reached the broadcast."""
    projects = list(positions)
    await conn.execute(
        """
        insert into relay_positions as r (project_id, published)
        select p.project_id, p.published
        from unnest(%s::uuid[], %s::bigint[]) as p (project_id, published)
        join projects on projects.id = p.project_id
        on conflict (project_id) do update
            set published = greatest(r.published, excluded.published)
        """,
        (projects, [positions[p] for p in projects]),
    )


async def try_lock(conn: Conn, lock: int) -> bool:
    """Take the advisory lock `lock` (the relay's leadership, the deliverer's) for this
    connection's session, if no other session holds it."""
    cur = await conn.execute("select pg_try_advisory_lock(%s)", (lock,))
    row = await cur.fetchone()
    return bool(row and row[0])


def relay_lock(group: int | None) -> int:
    """The relay's advisory lock: one for the whole database, or on Citus one per worker
    group (taken on the coordinator)."""
    return RELAY_LOCK if group is None else RELAY_LOCK + (group << 48)


async def listen(conn: Conn) -> None:
    await conn.execute(f"listen {NOTIFY_CHANNEL}")


async def notified(conn: Conn, wait: float) -> list[Notify]:
    """The notifications of this connection's channels that arrive within `wait` seconds
    of waiting for the first, with every one already waiting behind it (the backlog comes at
    once)."""
    received = [n async for n in conn.notifies(timeout=wait, stop_after=1)]
    if received:
        received += [n async for n in conn.notifies(timeout=0)]
    return received


def moved_projects(notifies: Sequence[Notify]) -> set[uuid.UUID] | None:
    """The projects the event notifications among `notifies` name (`<project id>:<cursor>`,
    014_notify_project.sql); None when one names none (a server not yet migrated sends the
    cursor alone), so the caller reads every project."""
    moved: set[uuid.UUID] = set()
    for notify in notifies:
        if notify.channel != NOTIFY_CHANNEL:
            continue
        project, _, _ = notify.payload.partition(":")
        try:
            moved.add(uuid.UUID(project))
        except ValueError:
            return None
    return moved


# --- writing the log (in the write's own transaction) ----------------------------------


# The cursors are drawn from the project's counter, in the same statement as the events: the
# counter's row stays locked until the transaction ends, so this is the transaction's last
# statement (see PendingEvents). A project's first event creates its counter.
INSERT_EVENTS = """
    with drawn as (
        insert into project_cursors as c (project_id, last)
        values (%(project_id)s, %(count)s)
        on conflict (project_id) do update set last = c.last + excluded.last
        returning last
    )
    insert into memory_events
        (cursor, project_id, scope, owner_id, type, memory_id, actor_id, payload)
    select drawn.last - %(count)s + e.n, %(project_id)s, e.scope, e.owner_id, e.type,
           e.memory_id, %(actor_id)s, e.payload
    from drawn, unnest(%(scopes)s::text[], %(owners)s::text[], %(types)s::text[],
                       %(memory_ids)s::uuid[], %(payloads)s::jsonb[])
                with ordinality as e (scope, owner_id, type, memory_id, payload, n)
    returning cursor
"""


# On Citus the same, in two statements, each routed to the project's shard: the draw, then the
# events with their cursors as values. (Citus runs the one statement above as an INSERT ...
# SELECT through the coordinator, over a second connection to the worker, and so commits it
# in two phases, which the events' NOTIFY forbids.)
DRAW_CURSORS = """
    insert into project_cursors as c (project_id, last)
    values (%(project_id)s, %(count)s)
    on conflict (project_id) do update set last = c.last + excluded.last
    returning last
"""
_EVENT_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s)"


@dataclass
class PendingEvents:
    """A write transaction's events, written by `write` once everything else the transaction
    does is done: drawing their cursors locks the project's counter until the transaction
    ends, and nothing else should wait for that, or be waited for while holding it."""

    principal: Principal
    # the database is a Citus coordinator's (see DRAW_CURSORS)
    distributed: bool = False
    _events: list[tuple[EventType, Scope, uuid.UUID | None, dict[str, Any]]] = field(
        default_factory=list
    )

    def add(
        self,
        type: EventType,
        scope: Scope,
        memory_id: uuid.UUID | None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        self._events.append((type, scope, memory_id, payload or {}))

    async def write(self, conn: Conn) -> list[int]:
        """Record the events in one statement, in the order added; their cursors."""
        events, self._events = self._events, []
        return await insert_events(conn, self.principal, events, distributed=self.distributed)


async def insert_events(
    conn: Conn,
    principal: Principal,
    events: Sequence[tuple[EventType, Scope, uuid.UUID | None, dict[str, Any]]],
    *,
    distributed: bool = False,
) -> list[int]:
    """Record events, (type, scope, memory id, payload) each, in order: the last statement of
    the write's transaction. Their cursors, in the same order."""
    if not events:
        return []
    if distributed:
        return await _insert_events_routed(conn, principal, events)
    cur = await conn.execute(
        INSERT_EVENTS,
        {
            "project_id": principal.project_id,
            "count": len(events),
            "actor_id": principal.user_id,
            "scopes": [scope.value for _, scope, _, _ in events],
            "owners": [principal.owner_for(scope) for _, scope, _, _ in events],
            "types": [str(type) for type, _, _, _ in events],
            "memory_ids": [memory_id for _, _, memory_id, _ in events],
            "payloads": [Jsonb(payload) for _, _, _, payload in events],
        },
    )
    return sorted(int(row[0]) for row in await cur.fetchall())


async def _insert_events_routed(
    conn: Conn,
    principal: Principal,
    events: Sequence[tuple[EventType, Scope, uuid.UUID | None, dict[str, Any]]],
) -> list[int]:
    cur = await conn.execute(
        DRAW_CURSORS, {"project_id": principal.project_id, "count": len(events)}
    )
    row = await cur.fetchone()
    assert row is not None
    first = int(row[0]) - len(events) + 1
    values: list[Any] = []
    for n, (type, scope, memory_id, payload) in enumerate(events):
        values += [
            first + n,
            principal.project_id,
            scope.value,
            principal.owner_for(scope),
            str(type),
            memory_id,
            principal.user_id,
            Jsonb(payload),
        ]
    await conn.execute(
        "insert into memory_events"
        " (cursor, project_id, scope, owner_id, type, memory_id, actor_id, payload)"
        " values " + ", ".join([_EVENT_ROW] * len(events)),
        values,
    )
    return list(range(first, first + len(events)))
