"""`/metrics` over HTTP: the Prometheus exposition, behind a bearer token when one is set, on
the API port or on a port of its own.

By default it is served on the API port without a token, as before: the figures hold no
memory, user or project (operation counts and latencies, save outcomes, pool gauges), a
Prometheus scrape works unconfigured, and the server listens on loopback unless told
otherwise. A deployment that listens beyond loopback is warned at start to set
`MEMQL_METRICS_TOKEN` or `MEMQL_METRICS_PORT`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memql import metrics
from memql.errors import ConfigurationError
from memql.http import errors as http_errors
from memql.settings import Settings

log = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]


def metrics_endpoint(token: str | None) -> Endpoint:
    """The exposition; with `token`, only for `Authorization: Bearer <token>`."""
    expected = f"Bearer {token}".encode() if token else None

    async def endpoint(request: Request) -> Response:
        if expected is not None:
            given = request.headers.get("authorization", "").encode("latin-1")
            if not hmac.compare_digest(given, expected):
                return http_errors.error_response(
                    401,
                    "/metrics needs `Authorization: Bearer <MEMQL_METRICS_TOKEN>`",
                    headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
                )
        return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return endpoint


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_public(settings: Settings) -> None:
    if settings.metrics_token or settings.metrics_port or is_loopback(settings.host):
        return
    log.warning(
        "/metrics is served without a token on %s:%d; set MEMQL_METRICS_TOKEN, or"
        " MEMQL_METRICS_PORT to serve it on a port of its own",
        settings.host,
        settings.port,
    )


class _SideServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # the API's server owns the process's signals and closes this one from its lifespan
        yield


@contextlib.asynccontextmanager
async def serve_metrics(settings: Settings, port: int) -> AsyncIterator[None]:
    """`/metrics` alone on `port` (same host as the API) while the context is open."""
    app = Starlette(
        routes=[Route("/metrics", metrics_endpoint(settings.metrics_token))],
        exception_handlers={HTTPException: http_errors.http_exception},
    )
    # bound here, so a port in use is a clear start-up error rather than an exit in a task
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(
            f"cannot serve /metrics on {settings.host}:{port} (MEMQL_METRICS_PORT): {exc}"
        ) from None
    server = _SideServer(uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        # uvicorn signals start-up by a flag, not an event
        while not server.started and not task.done():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        if task.done():
            task.result()
        log.info("/metrics on %s:%d", settings.host, port)
        yield
    finally:
        server.should_exit = True
        await task
        sock.close()
