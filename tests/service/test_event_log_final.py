"""The event log per project: cursors drawn from the project's counter commit in order and
without gaps, so every subscriber and every webhook gets each project's events in order, once,
with none missing; and cursors clients held before the per-project log keep their place."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import psycopg

from memql.access.credentials import display_prefix, generate_key, hash_key
from memql.db import webhooks as db_webhooks
from memql.db.migrate import migrate
from memql.db.pool import owner_connection
from memql.model import Access, Consumer, Grant, Kind, MemoryEvent, Principal
from memql.requests import MemoryDraft
from memql.runtime import open_memql
from memql.service import MemoryService
from memql.settings import Settings
from memql.testing import Tenant, draw_event, fresh_database, make_tenant, webhook_receiver

WRITERS = 8
PROJECTS = 4
WRITES_EACH = 24


@asynccontextmanager
async def service_of(url: str, embedder: Any) -> AsyncIterator[MemoryService]:
    settings = Settings(
        database_url=url,
        pool_min_size=1,
        pool_max_size=6,
        webhooks_allow_private=True,
        webhooks_timeout=2.0,
        webhooks_backoff_min=0.05,
        webhooks_backoff_max=0.2,
    )
    async with open_memql(settings, embedder=embedder) as memql:
        yield memql.service


def principal_of(tenant: Tenant, user: str = "alice") -> Principal:
    return Principal(
        project_id=tenant.project_id,
        project_name=tenant.project_name,
        user_id=user,
        consumer=Consumer.AGENT,
        grant=Grant(user=Access.READ_WRITE, project=Access.READ_WRITE),
    )


async def raw_write(url: str, project_id: uuid.UUID, abort: bool) -> bool:
    """A write's event drawn as a write draws it (`db.events.INSERT_EVENTS`' shape), with work
    on either side of the draw; aborted after the draw when `abort`. True if it committed."""
    async with await owner_connection(url) as conn:
        await asyncio.sleep(random.uniform(0, 0.004))
        await draw_event(conn, project_id, actor_id="writer")
        await asyncio.sleep(random.uniform(0, 0.002))
        if abort:
            await conn.rollback()
            return False
        await conn.commit()
        return True


async def log_of(url: str, project_id: uuid.UUID) -> list[int]:
    async with await owner_connection(url) as conn:
        cur = await conn.execute(
            "select cursor from memory_events where project_id = %s order by cursor",
            (project_id,),
        )
        return [int(c) for (c,) in await cur.fetchall()]


async def until(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.02)


async def collect(stream: AsyncIterator[MemoryEvent], into: list[int]) -> None:
    async for event in stream:
        into.append(event.cursor)


async def test_concurrent_writers_with_aborts_reach_every_subscriber_and_webhook_in_order_once(
    database_url: str, embedder: Any
) -> None:
    """8 writers on 4 projects, a tenth of their transactions aborted after drawing a cursor:
    each project's log is exactly 1..k, and each project's subscriber and webhook receive
    exactly that, in order."""
    random.seed(22)
    async with (
        fresh_database(database_url) as url,
        webhook_receiver() as receiver,
        service_of(url, embedder) as service,
    ):
        tenants = [await make_tenant(url) for _ in range(PROJECTS)]
        async with await owner_connection(url, autocommit=True) as conn:
            for i, t in enumerate(tenants):
                await db_webhooks.insert_webhook(
                    conn, t.project_id, f"{receiver.url}/p{i}", None, "s3cret", "test"
                )
        received: list[list[int]] = [[] for _ in tenants]
        streams = [
            asyncio.create_task(
                collect(service.memory_events(principal_of(t), since="0"), received[i])
            )
            for i, t in enumerate(tenants)
        ]
        committed = [0] * PROJECTS

        async def writer(w: int) -> None:
            p = w % PROJECTS
            for n in range(WRITES_EACH):
                if n % 3 == 0:
                    # the service's own write path
                    await service.save(
                        principal_of(tenants[p]),
                        MemoryDraft(content=f"writer {w} note {n} on day {n}", kind=Kind.EPISODIC),
                    )
                    committed[p] += 1
                elif await raw_write(url, tenants[p].project_id, abort=random.random() < 0.1):
                    committed[p] += 1

        try:
            await asyncio.wait_for(asyncio.gather(*(writer(w) for w in range(WRITERS))), 60)
            logs = [await log_of(url, t.project_id) for t in tenants]
            for p, log in enumerate(logs):
                assert log == list(range(1, committed[p] + 1)), f"project {p}: gaps in {log}"
            await until(
                lambda: all(len(r) >= len(log) for r, log in zip(received, logs, strict=True)),
                20,
                "every subscriber got its project's events",
            )
            await until(
                lambda: all(
                    len(receiver.accepted(f"/p{p}")) >= len(log) for p, log in enumerate(logs)
                ),
                30,
                "every webhook got its project's events",
            )
            await asyncio.sleep(0.3)
            for p, log in enumerate(logs):
                assert received[p] == log, f"subscriber of project {p}"
                assert [r.cursor for r in receiver.accepted(f"/p{p}")] == log, f"webhook {p}"
        finally:
            for s in streams:
                s.cancel()
            await asyncio.gather(*streams, return_exceptions=True)


# --- a log written before cursors counted per project ----------------------------------


def _migrations_until(last: str) -> list[tuple[str, str]]:
    folder = resources.files("memql.db") / "migrations"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    chosen = [(f.name.removesuffix(".sql"), f.read_text(encoding="utf-8")) for f in files]
    return [(n, sql) for n, sql in chosen if n <= last]


async def _migrate_until(url: str, last: str) -> None:
    async with await owner_connection(url, autocommit=True) as conn:
        await conn.execute(
            "create table schema_migrations ("
            " name text primary key, applied_at timestamptz not null default now())"
        )
        for name, sql in _migrations_until(last):
            async with conn.transaction():
                await conn.execute(sql.encode())
                await conn.execute("insert into schema_migrations (name) values (%s)", (name,))


async def _old_tenant(url: str) -> Tenant:
    """A project and its key as the schema of the global log held them (`make_tenant` writes
    columns that later migrations added)."""
    key = generate_key()
    async with await owner_connection(url, autocommit=True) as conn:
        cur = await conn.execute(
            "insert into projects (name) values (%s) returning id, name",
            (f"test-{uuid.uuid4().hex[:10]}",),
        )
        row = await cur.fetchone()
        assert row is not None
        await conn.execute(
            "insert into api_keys (project_id, prefix, key_hash, consumer) values (%s, %s, %s, %s)",
            (row[0], display_prefix(key), hash_key(key), Consumer.AGENT.value),
        )
    return Tenant(row[0], row[1], key)


async def _old_event(conn: psycopg.AsyncConnection[Any], project_id: uuid.UUID) -> int:
    """An event as the global log wrote it (its cursor from the table's identity)."""
    cur = await conn.execute(
        "insert into memory_events (project_id, scope, owner_id, type, actor_id)"
        " values (%s, 'project', '', 'memory.retired', 'old') returning cursor",
        (project_id,),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_cursors_held_from_the_global_log_resume_exactly_after_the_migration(
    database_url: str, embedder: Any
) -> None:
    """Before: one global cursor; `a` has events 1, 2, 4, `b` has 3, 5, 6, 7 and a viewer of
    `a` was told the log stood at 7 (the global horizon). After the migration each resume
    gets exactly the events of its project it had not seen: none missed, none repeated."""
    async with fresh_database(database_url, migrated=False) as url:
        await _migrate_until(url, "010_credential_check")
        a, b = await _old_tenant(url), await _old_tenant(url)
        async with await owner_connection(url, autocommit=True) as conn:
            old_a, old_b = [], []
            for project in "aabab" + "bb":
                tenant, into = (a, old_a) if project == "a" else (b, old_b)
                into.append(await _old_event(conn, tenant.project_id))
            # an endpoint registered then starts at the global end of the log
            cur = await conn.execute(
                "insert into webhook_endpoints (project_id, url, secret, created_by, acked_cursor)"
                " select %s, 'http://127.0.0.1:9/h', 's', 'test', max(cursor) from memory_events"
                " returning acked_cursor",
                (a.project_id,),
            )
            hook_acked = await cur.fetchone()
            # drawn but never committed: the global sequence moved past every event
            async with conn.transaction():
                await _old_event(conn, b.project_id)
                raise psycopg.Rollback()
        assert old_a == [1, 2, 4] and old_b == [3, 5, 6, 7]
        assert hook_acked == (7,)
        viewer_of_a = 7

        assert (await migrate(url))[0] == "011_project_cursors"  # and any later one
        async with service_of(url, embedder) as service:
            alice = principal_of(a)
            # every cursor a client of `a` holds is still a valid `since`, even the global one
            assert int(await service.event_cursor(alice)) >= viewer_of_a
            new = []
            for i in range(3):
                saved = await service.save(
                    alice, MemoryDraft(content=f"after the migration {i}", kind=Kind.EPISODIC)
                )
                new.append(saved.memory.id)
            new_cursors = [c for c in await log_of(url, a.project_id) if c not in old_a]
            assert len(new_cursors) == 3 and min(new_cursors) > viewer_of_a
            assert new_cursors == sorted(new_cursors)

            async def resume(since: int, count: int) -> list[int]:
                stream = service.memory_events(alice, scope=None, since=str(since))
                got = [(await asyncio.wait_for(anext(stream), 10)).cursor for _ in range(count)]
                await stream.aclose()
                return got

            # from an event of `a`: its later old event, then the new ones
            assert await resume(2, 4) == [4, *new_cursors]
            # from the global horizon a viewer of `a` was given: exactly the new ones
            assert await resume(viewer_of_a, 3) == new_cursors
            # from before everything: all of `a`'s, once
            assert await resume(0, 6) == [*old_a, *new_cursors]
            # the webhook of `a` registered then has exactly the new events to deliver
            async with await owner_connection(url, autocommit=True) as conn:
                [listed] = await db_webhooks.list_webhooks(conn, a.project_id, pending=True)
            assert listed.acked_cursor == 7 and listed.pending == 3
            # `b`'s log goes on above every cursor it had
            await service.save(
                principal_of(b), MemoryDraft(content="b goes on", kind=Kind.EPISODIC)
            )
            assert (await log_of(url, b.project_id))[-1] > 8
