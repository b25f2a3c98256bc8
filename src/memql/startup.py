"""`memql serve`'s start: the listening socket bound first, the app's start run under watch,
and every failure a newcomer meets told in one line (exit code 2), never as a traceback.

uvicorn would log the lifespan's traceback (Starlette puts it in `lifespan.startup.failed`) and
bind its port only after the start, so a port in use was reported after "memql ready".
`StartupWatch` runs the app's lifespan itself, keeps the exception and tells uvicorn only that
the start failed; `bind` takes the port before anything starts.
"""

from __future__ import annotations

import errno
import logging
import re
import socket
from typing import Any

import psycopg

from memql.errors import ConfigurationError, MemqlError

log = logging.getLogger(__name__)


class StartFailed(Exception):
    """The server could not start; the message is the one line to print."""


def bind(host: str, port: int) -> socket.socket:
    """The listening socket for `host:port`, or `StartFailed` saying what holds it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartFailed(
                f"port {port} on {host} is already in use (another memql?): stop it, or set"
                " MEMQL_PORT to a free port"
            ) from None
        raise StartFailed(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _redacted(url: str) -> str:
    return re.sub(r"://([^:@/]*):[^@/]*@", r"://\1:***@", url)


def explain(exc: BaseException) -> str | None:
    """The one line that says what went wrong at start and what to do, for every failure that
    is not a bug; None for one that is (its traceback is what a report needs)."""
    if isinstance(exc, StartFailed | ConfigurationError | MemqlError):
        return str(exc)
    if isinstance(exc, psycopg.OperationalError):
        first = " ".join(line.strip() for line in str(exc).splitlines()).rstrip("?. ")
        if "does not exist" in first and "database" in first:
            return (
                f"PostgreSQL refused the database in DATABASE_URL: {first}. Create it"
                " (`createdb NAME`) or point DATABASE_URL at one that exists"
            )
        return (
            f"cannot reach PostgreSQL: {first}. Check that it runs and that DATABASE_URL is"
            " right, or unset DATABASE_URL to use the embedded PostgreSQL"
        )
    if isinstance(exc, psycopg.Error):
        return f"PostgreSQL refused the start: {str(exc).strip().splitlines()[0]}"
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return (
            f"cannot use a file or directory{where}: {exc.strerror or exc} (is MEMQL_DATA_DIR"
            " a directory this user may write?)"
        )
    if isinstance(exc, ImportError):
        return f"cannot import a configured module: {exc}"
    return None


class StartupWatch:
    """ASGI wrapper around the app that runs its lifespan and keeps a start's failure in
    `failure` instead of letting the server log its traceback."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.failure: BaseException | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        await receive()  # lifespan.startup
        try:
            context = self.app.router.lifespan_context(self.app)
            state = await context.__aenter__()
        except BaseException as exc:  # reported by `serve`, in one line
            self.failure = exc
            await send({"type": "lifespan.startup.failed", "message": ""})
            return
        if state:
            scope["state"].update(state)
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            await context.__aexit__(None, None, None)
        except BaseException as exc:
            log.exception("the shutdown failed")
            await send({"type": "lifespan.shutdown.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.shutdown.complete"})


class _QuietStartFailure(logging.Filter):
    """uvicorn's own "Application startup failed" line: `serve` says why instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Application startup failed" not in record.getMessage()


def quiet_uvicorn() -> None:
    logging.getLogger("uvicorn.error").addFilter(_QuietStartFailure())
