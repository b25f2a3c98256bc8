"""create_app(settings) -> the ASGI app. Every resource opens in the lifespan, none at import."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from memql import metrics
from memql.embeddings import Embedder
from memql.graphql.admin.endpoint import ADMIN_PATH, AdminEndpoint
from memql.graphql.asgi import GraphQLApp
from memql.graphql.schema import build_schema
from memql.http import errors as http_errors
from memql.http import web
from memql.http.metrics import metrics_endpoint, serve_metrics, warn_if_public
from memql.http.origins import CrossOrigin
from memql.http.request_body import BodyLimit
from memql.http.web.headers import SecurityHeaders
from memql.mcp import McpMount
from memql.runtime import Memql, open_memql
from memql.settings import Settings
from memql.tracing import tracing_from, untraced_statements

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    freeze_startup: bool = False,
    tracer_provider: TracerProvider | None = None,
) -> Starlette:
    """The memql ASGI app. Pass `embedder` to share one loaded model between apps (tests);
    `freeze_startup` (a server process of its own) keeps what the start built out of the
    garbage collector's full passes. Tracing is on when the `OTEL_*` settings ask for it
    (`memql.tracing`), or with `tracer_provider`, whose own processors get the spans."""
    tracing = tracing_from(settings, tracer_provider)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        # everything opened here closes in reverse order, whether the start succeeds or not
        async with AsyncExitStack() as stack:
            if tracing is not None:
                await stack.enter_async_context(tracing.running())
                # the background loops opened here (relay, deliverer, listeners) poll the
                # database: their statements would be a trace every half second
                stack.enter_context(untraced_statements())
            memql = await stack.enter_async_context(open_memql(settings, embedder=embedder))
            metrics.watch_pool(memql.pool, memql.service.sessions.shares, graphql.cost_shares)
            stack.callback(metrics.watch_pool, None)
            await stack.enter_async_context(mcp.running())
            if settings.metrics_port is not None:
                await stack.enter_async_context(serve_metrics(settings, settings.metrics_port))
            else:
                warn_if_public(settings)
            log.info("memql ready (embedder %s)", memql.embedder.model)
            if freeze_startup:
                # the ~150,000 objects of a started server live as long as it does; a full
                # collection would walk them every time the subscribers' objects grow by a
                # quarter, pausing every stream (docs/benchmarks.md)
                gc.collect()
                gc.freeze()
            # handed to every request (`request.state`): the transports take what they call
            yield {"memql": memql, "service": memql.service, "authenticator": memql.authenticator}

    graphql = GraphQLApp(
        build_schema(
            introspection=settings.introspection,
            max_writes=settings.limits.batch_save,
            batch_max=settings.batch_max,
            max_document_bytes=settings.max_document_bytes,
            max_cost=settings.max_request_cost,
            cost_at_once=settings.project_cost_at_once,
            cost_wait=settings.pool_timeout_seconds,
            limits=settings.limits,
            extensions=() if tracing is None else (tracing.extension(),),
        ),
        max_message_bytes=settings.max_body_bytes,
        persisted_queries=settings.persisted_queries,
        request_timeout=settings.request_timeout_seconds,
        graphql_ide="graphiql" if settings.graphiql else None,
        # websocket handshakes from these sites' pages (CORS does not cover websockets)
        allowed_origins=settings.cors_origins,
    )

    mcp = McpMount()

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        memql: Memql | None = getattr(request.state, "memql", None)
        if memql is None:
            return JSONResponse(
                {"status": "starting", **http_errors.error_body("starting", "SERVICE_UNAVAILABLE")},
                status_code=503,
            )
        try:
            async with memql.pool.connection(timeout=2) as conn:
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
        body = {
            "status": "ready",
            "database": "up",
            "embedder": memql.embedder.model,
            **memql.realtime.state(),
            "webhooks": memql.webhooks.state(),
        }
        broadcast = body["broadcast"]
        if broadcast["state"] != "up" and not broadcast["reconnects"]:
            # never connected since the start (a wrong or dead REDIS_URL): subscribers here
            # would get nothing, so the instance is not ready
            return JSONResponse(
                {
                    **body,
                    "status": "unavailable",
                    **http_errors.error_body(
                        f"the broadcast ({broadcast['backend']}, REDIS_URL) has not connected"
                        " since the start: live subscriptions would get no events",
                        "SERVICE_UNAVAILABLE",
                    ),
                },
                status_code=503,
            )
        if broadcast["state"] != "up":
            # lost after it was up: queries and writes work, subscribers catch up from the
            # event log once it is back; taking every instance out would stop those too
            body["status"] = "degraded"
        return JSONResponse(body)

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
    if settings.admin_tokens:
        # off unless an operator is configured: the path is then unknown, a plain 404
        routes.append(Route(ADMIN_PATH, AdminEndpoint(settings), methods=["POST"]))
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            # the request's span encloses everything else the request does
            *(() if tracing is None else (tracing.middleware(),)),
            Middleware(SecurityHeaders),
            Middleware(CrossOrigin, origins=settings.cors_origins),
            Middleware(
                BodyLimit,
                max_bytes=settings.max_body_bytes,
                # room for a document of the longest kind, escaped as JSON
                anonymous_max_bytes=2 * settings.max_document_bytes,
            ),
        ],
        # refusals are JSON like every other error (errors[].extensions.code)
        exception_handlers={
            HTTPException: http_errors.http_exception,
            Exception: http_errors.unexpected,
        },
    )
