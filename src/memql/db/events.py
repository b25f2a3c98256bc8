"""SQL of the event log: each write's event (in the write's transaction), reading the log in
cursor order, and the relay's position.

The relay's reads are system-level (every tenant's events) and run on its own connection; a
subscriber's replay runs in the subscriber's principal-bound transaction, filtered here by owner.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memql.db.memories import MEMORY_COLUMNS, memory_from_row
from memql.db.pool import Conn
from memql.model import EventType, MemoryEvent, Principal, Scope

# held (session level) by the one relay that publishes; a constant shared by every instance
RELAY_LOCK = 0x6D656D716C_01
NOTIFY_CHANNEL = "memql_events"

_EVENT_COLUMNS = f"""
    e.cursor as e_cursor, e.project_id as e_project_id, e.scope as e_scope,
    e.owner_id as e_owner_id, e.type as e_type, e.memory_id as e_memory_id,
    e.actor_id as e_actor_id, e.occurred_at as e_occurred_at, {MEMORY_COLUMNS}
"""


def _event(row: dict[str, Any]) -> MemoryEvent:
    return MemoryEvent(
        cursor=int(row["e_cursor"]),
        project_id=row["e_project_id"],
        scope=Scope(row["e_scope"]),
        owner_id=row["e_owner_id"],
        type=EventType(row["e_type"]),
        memory_id=row["e_memory_id"],
        actor_id=row["e_actor_id"],
        occurred_at=row["e_occurred_at"],
        memory=memory_from_row(row) if row["id"] is not None else None,
    )


@dataclass(frozen=True)
class Gap:
    """Cursor `cursor` was missing while later ones were committed. Its transaction, if it is
    still running, is one of `xids` (the transactions that held an id when the gap was seen)."""

    cursor: int
    xids: tuple[str, ...]

    @property
    def decided(self) -> bool:
        """Nothing was running when it was seen: the next read settles it, without waiting."""
        return not self.xids


@dataclass(frozen=True)
class FinalEvents:
    events: list[MemoryEvent]
    # the first cursor that may still appear (its transaction may still commit), if any
    waiting: Gap | None


# Transactions holding an id right now, read from the lock table: every transaction holds an
# exclusive lock on its own id from the moment it takes one until it has ended, and the lock is
# released only after its commit is visible to new snapshots. (A snapshot's in-progress list
# is not enough: it omits running transactions whose id is above the snapshot's xmax, which is
# where a transaction that took its id after the newest completed one sits.)
_RUNNING = (
    "select array(select transactionid::text from pg_locks"
    " where locktype = 'transactionid' and mode = 'ExclusiveLock' and granted)"
)
_ANY_RUNNING = (
    "select exists(select from pg_locks where locktype = 'transactionid'"
    " and mode = 'ExclusiveLock' and granted and transactionid::text = any(%s::text[]))"
)


async def read_final(conn: Conn, after: int, gap: Gap | None, limit: int) -> FinalEvents:
    """Events after `after` in cursor order, stopping before any cursor that may still appear.

    Cursors are drawn at insert but transactions commit in any order, so a committed cursor may
    have a missing predecessor whose transaction is still running. Every event's transaction
    takes its id before drawing its cursor (insert_event), so the holder of a missing cursor
    held an id before the snapshot that saw the gap was taken: it was among the transactions
    running just after that snapshot, or it had ended by then (it committed after the snapshot,
    it aborted, or its event was erased). A gap is passed once every transaction running when
    it was seen has ended, and only by a read whose snapshot was taken after that: its cursor
    then either is visible or never will be.

    `conn` is in autocommit mode; the events are read in one repeatable-read snapshot.
    """
    # The statements go out together and their answers come back together, in one round trip
    # (two with a gap to check) where a read took five (six); the server runs them in the order
    # sent, which is the order the reasoning above needs.
    async with conn.pipeline() as pipeline:
        ended = None
        if gap is not None and gap.xids:
            # asked before the snapshot below is taken, so a commit seen ended here is visible
            # there; synced on its own, so that it is not part of the transaction below
            ended = await conn.execute(_ANY_RUNNING, (list(gap.xids),))
            await pipeline.sync()
        async with conn.transaction():
            await conn.execute("set transaction isolation level repeatable read, read only")
            # the transaction's first read: it takes the snapshot
            events = conn.cursor(row_factory=dict_row)
            await events.execute(
                f"""
                select {_EVENT_COLUMNS}
                from memory_events e left join memories m on m.id = e.memory_id
                where e.cursor > %s order by e.cursor limit %s
                """,
                (after, limit),
            )
            running_now = await conn.execute(_RUNNING)
        await pipeline.sync()
        gap_ended = True
        if ended is not None:
            row = await ended.fetchone()
            gap_ended = not (row and row[0])
        rows = await events.fetchall()
        await events.close()
        [(running,)] = await running_now.fetchall()
    passed = gap.cursor if gap is not None and gap_ended else None
    accepted: list[MemoryEvent] = []
    expected = after + 1
    for r in rows:
        event = _event(r)
        if event.cursor != expected and expected != passed:
            waiting = gap if gap is not None and gap.cursor == expected else None
            return FinalEvents(accepted, waiting or Gap(expected, tuple(running)))
        accepted.append(event)
        expected = event.cursor + 1
    return FinalEvents(accepted, None)


async def _running(conn: Conn) -> list[str]:
    cur = await conn.execute(_RUNNING)
    row = await cur.fetchone()
    assert row is not None
    return list(row[0])


async def replay(
    conn: Conn,
    principal: Principal,
    scopes: Sequence[Scope],
    after: int,
    upto: int,
    limit: int,
) -> list[MemoryEvent]:
    """The principal's events in (`after`, `upto`], oldest first, at most `limit`."""
    async with conn.cursor(row_factory=dict_row) as c:
        await c.execute(
            f"""
            select {_EVENT_COLUMNS}
            from memory_events e left join memories m on m.id = e.memory_id
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
        return [_event(r) for r in await c.fetchall()]


async def last_issued(conn: Conn) -> int:
    """The highest cursor ever drawn (committed or not, erased or not); 0 before the first."""
    cur = await conn.execute(
        "select coalesce(pg_sequence_last_value("
        "pg_get_serial_sequence('memory_events', 'cursor')::regclass), 0)"
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


@dataclass(frozen=True)
class RelayPosition:
    # every event up to here reached the broadcast
    published: int
    # every event up to here is final, and none above it has been broadcast
    horizon: int


async def relay_position(conn: Conn) -> RelayPosition:
    cur = await conn.execute("select published, horizon from realtime_relay")
    row = await cur.fetchone()
    assert row is not None, "migration 003_realtime has not run"
    return RelayPosition(int(row[0]), int(row[1]))


async def try_lock(conn: Conn, lock: int) -> bool:
    """Take the advisory lock `lock` (the relay's leadership, the deliverer's) for this
    connection's session, if no other session holds it."""
    cur = await conn.execute("select pg_try_advisory_lock(%s)", (lock,))
    row = await cur.fetchone()
    return bool(row and row[0])


async def listen(conn: Conn) -> None:
    await conn.execute(f"listen {NOTIFY_CHANNEL}")


async def advance_horizon(conn: Conn, horizon: int, leader: str) -> None:
    """Declare events up to `horizon` final before any of them is broadcast."""
    await conn.execute(
        "update realtime_relay set horizon = greatest(horizon, %s), leader = %s,"
        " updated_at = now()",
        (horizon, leader),
    )


async def mark_published(conn: Conn, published: int) -> None:
    await conn.execute(
        "update realtime_relay set published = greatest(published, %s), updated_at = now()",
        (published,),
    )


async def final_position(conn: Conn, poll: float = 0.05) -> int:
    """A cursor up to which every event is final: the newest committed one, once every
    transaction running just after it was read has ended (one of them may hold a lower
    cursor)."""
    cur = await conn.execute("select coalesce(max(cursor), 0) from memory_events")
    row = await cur.fetchone()
    assert row is not None
    newest = int(row[0])
    xids = await _running(conn)
    while xids:
        cur = await conn.execute(_ANY_RUNNING, (xids,))
        still = await cur.fetchone()
        if not (still and still[0]):
            break
        await asyncio.sleep(poll)
    return newest


# --- writing the log (in the write's own transaction) ----------------------------------


# The transaction id is taken before the cursor: the relay relies on every event's transaction
# holding an id before its cursor is drawn (see realtime/relay.py).
INSERT_EVENT = """
    with tx as materialized (select pg_current_xact_id() as xid)
    insert into memory_events (project_id, scope, owner_id, type, memory_id, actor_id, payload)
    select %s, %s, %s, %s, %s, %s, %s from tx where tx.xid is not null
    returning cursor
"""


def _event_params(
    principal: Principal,
    type: EventType,
    scope: Scope,
    memory_id: uuid.UUID | None,
    payload: dict[str, Any],
) -> tuple[Any, ...]:
    return (
        principal.project_id,
        scope.value,
        principal.owner_for(scope),
        str(type),
        memory_id,
        principal.user_id,
        Jsonb(payload),
    )


async def insert_event(
    conn: Conn,
    principal: Principal,
    *,
    type: EventType,
    scope: Scope,
    memory_id: uuid.UUID | None,
    payload: dict[str, Any],
) -> int:
    cur = await conn.execute(
        INSERT_EVENT, _event_params(principal, type, scope, memory_id, payload)
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def insert_events(
    conn: Conn,
    principal: Principal,
    events: Sequence[tuple[EventType, Scope, uuid.UUID | None, dict[str, Any]]],
) -> None:
    """Record several events, (type, scope, memory id, payload) each, in one round trip."""
    async with conn.cursor() as cur:
        await cur.executemany(INSERT_EVENT, [_event_params(principal, *event) for event in events])
