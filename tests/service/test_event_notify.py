"""A write's notification names its project and the highest cursor it wrote, once per write
(not once per event), so the relay and the deliverer read only the projects that moved; and a
relay woken for one project still publishes every other project's events."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from memql.db import cluster as db_cluster
from memql.db import events as db_events
from memql.db.pool import owner_connection
from memql.db.session import is_distributed
from memql.model import Access, Consumer, Grant, Kind, Principal
from memql.realtime import wire
from memql.requests import MemoryDraft
from memql.runtime import open_memql
from memql.settings import Settings
from memql.testing import Tenant, log_event, make_tenant


def principal_of(tenant: Tenant) -> Principal:
    return Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip


async def where_notified(database_url: str, project_id: uuid.UUID) -> str:
    """Where the project's writes notify: the database itself, or on Citus the worker that
    holds the project's shard."""
    async with await owner_connection(database_url, autocommit=True) as conn:
        if not await is_distributed(conn):
            return database_url
        group = await db_cluster.group_of(conn, project_id)
    return group.url(database_url)


async def test_a_batch_save_notifies_once_naming_its_project_and_last_cursor(
    tenant: Tenant, database_url: str, embedder: Any
):
    async with (
        await owner_connection(
            await where_notified(database_url, tenant.project_id), autocommit=True
        ) as listener,
        open_memql(Settings(database_url=database_url, pool_max_size=2), embedder=embedder) as m,
    ):
        await listener.execute(f"listen {db_events.NOTIFY_CHANNEL}")
        results = await m.service.save_many(
            principal_of(tenant),
            [
                MemoryDraft(text, Kind.TOPICAL)
                for text in ("alpha apples", "bravo boats", "charlie cars")
            ],
        )
        assert len(results) == 3
        notifies = await db_events.notified(listener, 2.0)
        await asyncio.sleep(0.1)
        notifies += await db_events.notified(listener, 0)
    ours = [n.payload for n in notifies if n.payload.startswith(str(tenant.project_id))]
    async with await owner_connection(database_url) as conn:
        cur = await conn.execute(
            "select max(cursor), count(*) from memory_events where project_id = %s",
            (tenant.project_id,),
        )
        last, count = await cur.fetchone() or (None, None)
    assert count == 3
    assert ours == [f"{tenant.project_id}:{last}"], "one notification per write, naming it"
    moved = db_events.moved_projects(notifies)
    assert moved is not None and tenant.project_id in moved


async def test_a_notification_without_a_project_makes_the_reader_read_every_project(
    database_url: str,
):
    async with await owner_connection(database_url, autocommit=True) as conn:
        await conn.execute(f"listen {db_events.NOTIFY_CHANNEL}")
        await conn.execute(f"notify {db_events.NOTIFY_CHANNEL}, '41'")
        assert db_events.moved_projects(await db_events.notified(conn, 2.0)) is None


async def test_the_relay_woken_for_one_project_publishes_the_others_too(
    database_url: str, embedder: Any
):
    """A notification for project A wakes the relay, which reads A only; an event of B whose
    notification was not seen (here: written without one) still goes out within the sweep."""
    a, b = await make_tenant(database_url), await make_tenant(database_url)
    settings = Settings(database_url=database_url, pool_max_size=2)
    async with open_memql(settings, embedder=embedder) as memql:
        # the relay leads (in memory it starts from the counters as they stand then)
        await memql.service.event_cursor(principal_of(b))
        bus = memql.realtime.bus
        async with bus.inbox([(wire.channel(b.project_id), "project")], 100) as inbox:
            async with await owner_connection(database_url) as conn:
                # B's event, its notification suppressed by the trigger being off for this
                # transaction only: only the sweep can find it (on Citus, on the worker too,
                # in the two routed statements of a write there)
                await conn.execute("set local citus.propagate_set_commands = 'local'")
                await conn.execute("set local session_replication_role = replica")
                cur = await conn.execute(
                    db_events.DRAW_CURSORS, {"project_id": b.project_id, "count": 1}
                )
                [drawn] = await cur.fetchone() or (None,)
                await conn.execute(
                    "insert into memory_events (cursor, project_id, scope, owner_id, type,"
                    " actor_id) values (%s, %s, 'project', '', 'memory.retired', 'test')",
                    (drawn, b.project_id),
                )
                await conn.commit()
            await log_event(database_url, a.project_id)
            async with asyncio.timeout(5):
                while not len(inbox):
                    await inbox.wait()
            [event] = inbox.take()
            assert event.project_id == b.project_id
