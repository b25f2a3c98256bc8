"""create_app(settings) -> the ASGI app. Every resource opens in the lifespan, none at import."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import psycopg
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from memql import http_errors, metrics, web
from memql.access.authenticate import Authenticator, policy_from
from memql.access.cache import listening
from memql.db import embedding_space as space
from memql.db import tenants
from memql.db.embedded import EmbeddedDatabase
from memql.db.migrate import migrate
from memql.db.pool import open_pool, system_connection
from memql.embeddings import Embedder, create_embedder
from memql.errors import ConfigurationError
from memql.graphql.asgi import GraphQLApp
from memql.graphql.schema import build_schema
from memql.mcp import McpEndpoint
from memql.metrics_http import metrics_endpoint, serve_metrics, warn_if_public
from memql.origins import CrossOrigin
from memql.realtime import Realtime, open_realtime
from memql.request_body import BodyLimit
from memql.service import MemoryService
from memql.settings import Settings
from memql.webhooks.delivery import Deliverer
from memql.webhooks.delivery import running as delivering

log = logging.getLogger(__name__)

DEV_PROJECT = "dev"


@dataclass
class Resources:
    pool: AsyncConnectionPool
    embedder: Embedder
    service: MemoryService
    authenticator: Authenticator
    realtime: Realtime
    webhooks: Deliverer


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
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            if await space.ensure_ann_index(conn, embedder.dimensions):
                log.info(
                    "built the project-scope vector index (%d dimensions)", embedder.dimensions
                )
    except (psycopg.Error, RuntimeError) as exc:
        log.warning("project-scope recall will scan without its vector index: %s", exc)


async def ensure_first_project(url: str, *, embedded: bool) -> None:
    """On an empty database, make a `dev` project (embedded default) or say how to make one."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
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


def create_app(settings: Settings, *, embedder: Embedder | None = None) -> Starlette:
    """The memql ASGI app. Pass `embedder` to share one loaded model between apps (tests)."""
    resources: Resources | None = None

    def current() -> tuple[MemoryService, Authenticator]:
        if resources is None:
            raise RuntimeError("memql is not started (the lifespan has not run)")
        return resources.service, resources.authenticator

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        nonlocal resources
        policy = policy_from(settings)  # a bad MEMQL_ACCESS_POLICY stops the start here
        # everything opened here closes in reverse order, whether the start succeeds or not
        async with AsyncExitStack() as stack:
            url = settings.database_url
            if url is None:
                embedded = await asyncio.to_thread(EmbeddedDatabase, settings.data_dir)
                stack.callback(embedded.release)
                url = embedded.url
            await migrate(url)
            await ensure_first_project(url, embedded=settings.database_url is None)
            pool = await open_pool(
                url,
                min_size=settings.pool_min_size,
                max_size=settings.pool_max_size,
                wait=settings.pool_timeout_seconds,
            )
            stack.push_async_callback(pool.close)
            active = embedder
            if active is None:
                active = await create_embedder(settings.embedder_config)
                stack.push_async_callback(active.close)
            await check_embedding_space(url, active)
            await prepare_ann_index(url, active)
            realtime = await stack.enter_async_context(open_realtime(settings, url))
            webhooks = await stack.enter_async_context(
                delivering(Deliverer.from_settings(settings, url))
            )
            service = MemoryService(pool, active, settings, realtime=realtime)
            metrics.watch_pool(pool)
            stack.callback(metrics.watch_pool, None)
            await stack.enter_async_context(mcp.running())
            if settings.metrics_port is not None:
                await stack.enter_async_context(serve_metrics(settings, settings.metrics_port))
            else:
                warn_if_public(settings)
            authenticator = Authenticator(pool, policy)
            await stack.enter_async_context(listening(authenticator.cache, url))
            resources = Resources(pool, active, service, authenticator, realtime, webhooks)
            log.info("memql ready (embedder %s)", active.model)
            try:
                yield
            finally:
                resources = None

    graphql = GraphQLApp(
        build_schema(
            introspection=settings.introspection,
            max_writes=settings.limits.batch_save,
            batch_max=settings.batch_max,
        ),
        current,
        max_message_bytes=settings.max_body_bytes,
        persisted_queries=settings.persisted_queries,
        graphql_ide="graphiql" if settings.graphiql else None,
        # websocket handshakes from these sites' pages (CORS does not cover websockets)
        allowed_origins=settings.cors_origins,
    )

    mcp = McpEndpoint(current)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        if resources is None:
            return JSONResponse(
                {"status": "starting", **http_errors.error_body("starting", "SERVICE_UNAVAILABLE")},
                status_code=503,
            )
        try:
            async with resources.pool.connection(timeout=2) as conn:
                await conn.execute("select 1")
        except Exception as exc:
            log.warning("readiness check failed: %s", exc)
            return JSONResponse(
                {
                    "status": "unavailable",
                    "database": "down",
                    **http_errors.error_body("the database is down", "SERVICE_UNAVAILABLE"),
                },
                status_code=503,
            )
        return JSONResponse(
            {
                "status": "ready",
                "database": "up",
                "embedder": resources.embedder.model,
                **resources.realtime.state(),
                "webhooks": resources.webhooks.state(),
            }
        )

    routes = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql),
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        *web.routes(),
    ]
    if settings.metrics_port is None:
        routes.append(Route("/metrics", metrics_endpoint(settings.metrics_token)))
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(CrossOrigin, origins=settings.cors_origins),
            Middleware(BodyLimit, max_bytes=settings.max_body_bytes),
        ],
        # refusals are JSON like every other error (errors[].extensions.code)
        exception_handlers={
            HTTPException: http_errors.http_exception,
            Exception: http_errors.unexpected,
        },
    )
