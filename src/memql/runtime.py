"""One place that wires a running memql: the database, the pool, the embedder, the service, the
authenticator, realtime, the webhook deliverer and the credential cache's listener.

The app's lifespan (`app.py`), the command line (`cli.py`), the benchmarks and the tests all
enter through here: `open_memql` for the whole system, `open_database` and `open_embedder` for
commands that need only those. Each opens in order and closes in reverse, whether the start
succeeds or not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import psycopg
from psycopg_pool import AsyncConnectionPool

from memql import tracing
from memql.access.authenticate import Authenticator, policy_from, rates_from
from memql.access.cache import listening
from memql.db import embedding_space as space
from memql.db import tenants
from memql.db.embedded import EmbeddedDatabase
from memql.db.migrate import migrate
from memql.db.pool import open_pool, owner_connection, system_connection
from memql.db.replica import open_standby
from memql.embeddings import Embedder, create_embedder
from memql.errors import ConfigurationError
from memql.leadership import running
from memql.realtime import Realtime, open_realtime
from memql.service import MemoryService
from memql.settings import Settings
from memql.webhook_delivery import Deliverer

log = logging.getLogger(__name__)

DEV_PROJECT = "dev"


@dataclass(frozen=True)
class Memql:
    """A running memql: what requests, commands and tests use."""

    settings: Settings
    database_url: str
    pool: AsyncConnectionPool
    embedder: Embedder
    service: MemoryService
    authenticator: Authenticator
    realtime: Realtime
    webhooks: Deliverer


@asynccontextmanager
async def open_database(settings: Settings, *, migrated: bool = True) -> AsyncIterator[str]:
    """The database's URL: `DATABASE_URL`, or the embedded PostgreSQL in `MEMQL_DATA_DIR`
    (started, or joined when another process runs it; released at the end). With `migrated`,
    every pending migration is applied first."""
    async with AsyncExitStack() as stack:
        url = settings.database_url
        if url is None:
            embedded = await asyncio.to_thread(EmbeddedDatabase, settings.data_dir)
            stack.callback(embedded.release)
            url = embedded.url
        if migrated:
            await migrate(url)
        yield url


@asynccontextmanager
async def open_embedder(
    settings: Settings, embedder: Embedder | None = None
) -> AsyncIterator[Embedder]:
    """The embedder `settings` configure, loaded and closed at the end; or `embedder`, already
    loaded, which its owner closes (one model shared by many servers, or a test's stand-in)."""
    if embedder is not None:
        yield embedder
        return
    loaded = await create_embedder(settings.embedder_config)
    try:
        yield loaded
    finally:
        await loaded.close()


@asynccontextmanager
async def open_memql(
    settings: Settings, *, embedder: Embedder | None = None
) -> AsyncIterator[Memql]:
    """Everything a memql server runs, for `settings`; `embedder` as in `open_embedder`."""
    policy = policy_from(settings)  # a bad MEMQL_ACCESS_POLICY stops the start here
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(open_database(settings))
        await ensure_first_project(url, embedded=settings.database_url is None)
        pool = await open_pool(
            url,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            wait=settings.pool_timeout_seconds,
        )
        stack.push_async_callback(pool.close)
        active = tracing.traced(await stack.enter_async_context(open_embedder(settings, embedder)))
        await check_embedding_space(url, active)
        await prepare_ann_index(url, active)
        realtime = await stack.enter_async_context(open_realtime(settings, url))
        webhooks = await stack.enter_async_context(running(Deliverer.from_settings(settings, url)))
        standby = await open_standby(
            stack,
            url,
            read_url(settings, url),
            redis_url=settings.redis_url,
            max_size=settings.pool_max_size,
            wait=settings.read_wait_seconds,
        )
        service = MemoryService(pool, active, settings, realtime=realtime, standby=standby)
        authenticator = Authenticator(pool, policy, rates_from(settings))
        await stack.enter_async_context(listening(authenticator.cache, url))
        yield Memql(settings, url, pool, active, service, authenticator, realtime, webhooks)


def read_url(settings: Settings, url: str) -> str | None:
    """Where recall, lists, context blocks and counts of the database at `url` (the primary)
    read: `MEMQL_READ_DATABASE_URL`, or None for the primary itself. (The test suite points it
    at its standby here, for every database of the server.)"""
    return settings.read_database_url


async def check_embedding_space(url: str, embedder: Embedder) -> None:
    """Record the vector space on first start; refuse to start when the embedder disagrees."""
    async with await system_connection(url) as conn, conn.transaction():
        recorded = await space.embedding_space(conn)
        if recorded is None:
            await space.record_embedding_space(conn, embedder.model, embedder.dimensions)
            return
    model, dimensions = recorded
    if (model, dimensions) != (embedder.model, embedder.dimensions):
        raise ConfigurationError(
            f"the database holds vectors of {model} ({dimensions} dimensions) but the configured"
            f" embedder is {embedder.model} ({embedder.dimensions} dimensions). To move the"
            " stored memories to the new model, run `memql reembed` with the new configuration"
            " (servers with the old one may keep running meanwhile), then start the server;"
            " to keep the old model, configure the embedder back (MEMQL_EMBEDDER,"
            " MEMQL_EMBEDDINGS_MODEL)"
        )


async def prepare_ann_index(url: str, embedder: Embedder) -> None:
    """The HNSW index for project-scope recall in the current space (built once, concurrently).
    A failure only costs speed on very large projects: it is logged, not fatal."""
    try:
        async with await owner_connection(url, autocommit=True) as conn:
            if await space.ensure_ann_index(conn, embedder.dimensions):
                log.info(
                    "built the project-scope vector index (%d dimensions)", embedder.dimensions
                )
    except (psycopg.Error, RuntimeError) as exc:
        log.warning("project-scope recall will scan without its vector index: %s", exc)


async def ensure_first_project(url: str, *, embedded: bool) -> None:
    """On an empty database, make a `dev` project (embedded default) or say how to make one."""
    async with await owner_connection(url) as conn:
        if await tenants.list_projects(conn):
            return
        if not embedded:
            log.warning(
                "no project yet: create one with `memql projects create NAME`, then a key with"
                " `memql keys create --project NAME`"
            )
            return
        await tenants.create_project(conn, DEV_PROJECT)
        await conn.commit()
    log.warning(
        "first run: created the project '%s'. Get an API key with `memql keys create --project"
        " %s` and send it as `Authorization: Bearer <key>` with `X-User-Id: <user id>`",
        DEV_PROJECT,
        DEV_PROJECT,
    )
