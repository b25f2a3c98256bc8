"""Databases and tenants for tests: a database of its own, a project of its own with a key."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from psycopg import AsyncConnection

from memql.access.credentials import display_prefix, generate_key, hash_key
from memql.db import events as db_events
from memql.db import tenants
from memql.db.migrate import migrate
from memql.db.pool import owner_connection
from memql.db.session import is_distributed
from memql.model import Consumer


def url_for_database(url: str, name: str) -> str:
    """`url` (a postgresql:// URL) naming the database `name` instead of its own."""
    return urlsplit(url)._replace(path=f"/{name}").geturl()


@asynccontextmanager
async def fresh_database(url: str, *, migrated: bool = True) -> AsyncIterator[str]:
    """A new, empty database on the server of `url` (migrated unless told otherwise), dropped
    at the end; yields its URL. For tests that change what a whole database holds (its
    embedding space) or must not share one."""
    name = f"memql_{uuid.uuid4().hex[:12]}"
    fresh = await create_database(url, name)
    try:
        if migrated:
            await migrate(fresh)
        yield fresh
    finally:
        await drop_database(url, name)


async def _create(url: str, name: str) -> str:
    async with await owner_connection(url, autocommit=True) as conn:
        await conn.execute(f'create database "{name}"')
    return url_for_database(url, name)


async def _drop(url: str, name: str) -> None:
    async with await owner_connection(url, autocommit=True) as conn:
        await conn.execute(f'drop database "{name}" with (force)')


# How a database is made and dropped on the server of a URL; a cluster of several servers
# (`memql.testing.citus`) puts its own in their place, for the run it serves.
create_database: Callable[[str, str], Awaitable[str]] = _create
drop_database: Callable[[str, str], Awaitable[None]] = _drop


@dataclass(frozen=True)
class Tenant:
    project_id: uuid.UUID
    project_name: str
    key: str


async def make_tenant(
    database_url: str, consumer: Consumer = Consumer.AGENT, *, name: str | None = None
) -> Tenant:
    """A new project (named `name`, or a fresh unique name) and a key of `consumer` for it."""
    async with await owner_connection(database_url, autocommit=True) as conn:
        project = await tenants.create_project(conn, name or f"test-{uuid.uuid4().hex[:10]}")
        if project is None:
            raise ValueError(f"a project named {name!r} exists already")
        key = generate_key()
        await tenants.insert_api_key(conn, project.id, display_prefix(key), hash_key(key), consumer)
    return Tenant(project.id, project.name, key)


async def log_event(database_url: str, project_id: uuid.UUID) -> tuple[int, float]:
    """One project-scope event written straight into the event log, in a transaction of its
    own as a write's is (no memory behind it: for measuring delivery alone); its cursor and
    when COMMIT returned (`time.monotonic`)."""
    async with await owner_connection(database_url) as conn:
        cursor = await draw_event(conn, project_id, actor_id="bench")
        await conn.commit()
        return cursor, time.monotonic()


async def draw_event(
    conn: AsyncConnection[Any],
    project_id: uuid.UUID,
    *,
    scope: str = "project",
    owner_id: str = "",
    type: str = "memory.retired",
    actor_id: str = "test",
) -> int:
    """One event (no memory behind it) drawn from the project's counter as a write draws it,
    in `conn`'s transaction, which is left open: in one statement (`db.events.INSERT_EVENTS`'
    shape), or on Citus in the two routed statements of a write there (`DRAW_CURSORS`). Its
    cursor."""
    values = (scope, owner_id, type, actor_id)
    if await is_distributed(conn):
        cur = await conn.execute(db_events.DRAW_CURSORS, {"project_id": project_id, "count": 1})
        row = await cur.fetchone()
        assert row is not None
        await conn.execute(
            "insert into memory_events (cursor, project_id, scope, owner_id, type, actor_id)"
            " values (%s, %s, %s, %s, %s, %s)",
            (row[0], project_id, *values),
        )
        return int(row[0])
    cur = await conn.execute(
        "with drawn as (insert into project_cursors as c (project_id, last) values (%s, 1)"
        " on conflict (project_id) do update set last = c.last + 1 returning last)"
        " insert into memory_events (cursor, project_id, scope, owner_id, type, actor_id)"
        " select drawn.last, %s, %s, %s, %s, %s from drawn returning cursor",
        (project_id, project_id, *values),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def newest_cursor(conn: AsyncConnection[Any], project_id: uuid.UUID) -> int:
    """Where the project's event log stands (its committed counter: cursors count per project);
    a `since` from it replays nothing and misses nothing after it."""
    return await db_events.horizon(conn, project_id)
