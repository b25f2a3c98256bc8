"""What the relay (and the webhook deliverer) may publish: a cursor only once no lower one can
still commit. The hard case: a transaction that took its id after the newest completed one is
running, but a snapshot does not list it among the transactions in progress."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from memql.db import events as db_events
from memql.testing import Tenant

Conn = psycopg.AsyncConnection[Any]


async def take_id(conn: Conn) -> None:
    await conn.execute("select pg_current_xact_id()")


async def draw_event(conn: Conn, tenant: Tenant) -> int:
    cur = await conn.execute(
        "insert into memory_events (project_id, scope, owner_id, type, actor_id)"
        " values (%s, 'project', '', 'memory.retired', 'test') returning cursor",
        (tenant.project_id,),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def interleaved(database_url: str, tenant: Tenant) -> tuple[Conn, Conn, int, int]:
    """`first` takes its transaction id before `second`; `second` then draws the lower cursor
    and `first` the higher one, and `first` commits: the newest completed transaction is
    older than `second`, which is still running with the lower cursor."""
    first = await psycopg.AsyncConnection.connect(database_url)
    second = await psycopg.AsyncConnection.connect(database_url)
    await take_id(first)
    await take_id(second)
    low = await draw_event(second, tenant)
    high = await draw_event(first, tenant)
    await first.commit()
    return first, second, low, high


async def test_a_lower_cursor_still_running_is_waited_for_then_published(
    database_url: str, tenant: Tenant, db: Conn
) -> None:
    first, second, low, high = await interleaved(database_url, tenant)
    try:
        final = await db_events.read_final(db, low - 1, None, 100)
        assert final.events == []
        assert final.waiting is not None and final.waiting.cursor == low
        # still running: still waiting, however often it is asked
        final = await db_events.read_final(db, low - 1, final.waiting, 100)
        assert final.events == [] and final.waiting is not None
        await second.commit()
        final = await db_events.read_final(db, low - 1, final.waiting, 100)
        assert [e.cursor for e in final.events] == [low, high]
        assert final.waiting is None
    finally:
        await first.close()
        await second.close()


async def test_a_lower_cursor_whose_transaction_aborts_is_passed(
    database_url: str, tenant: Tenant, db: Conn
) -> None:
    first, second, low, high = await interleaved(database_url, tenant)
    try:
        final = await db_events.read_final(db, low - 1, None, 100)
        assert final.waiting is not None and final.waiting.cursor == low
        await second.rollback()
        final = await db_events.read_final(db, low - 1, final.waiting, 100)
        assert [e.cursor for e in final.events] == [high]
        assert final.waiting is None
    finally:
        await first.close()
        await second.close()


async def test_the_starting_position_waits_for_a_lower_cursor_still_running(
    database_url: str, tenant: Tenant, db: Conn
) -> None:
    first, second, _, high = await interleaved(database_url, tenant)
    try:
        starting = asyncio.create_task(db_events.final_position(db, poll=0.01))
        await asyncio.sleep(0.3)
        # the position would be `high`, but `low` may still commit below it
        assert not starting.done()
        await second.commit()
        assert await asyncio.wait_for(starting, 5) >= high
    finally:
        await first.close()
        await second.close()
