"""Real HTTP receivers of webhooks: one answers 200, 500, or too late, as told, and records
every request; a hostile one dribbles its answer a byte at a time and never finishes."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memql.testing.server import free_port


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    # the status it answered, or None when it answered too late to count
    status: int | None
    # when it arrived (time.monotonic)
    at: float = field(default_factory=time.monotonic)

    @property
    def event(self) -> dict[str, Any]:
        event: dict[str, Any] = json.loads(self.body)
        return event

    @property
    def cursor(self) -> int:
        return int(self.event["cursor"])


@dataclass
class Receiver:
    url: str
    # "ok" (200), "fail" (500) or "hang" (answers after `hang_seconds`)
    mode: str = "ok"
    hang_seconds: float = 1.5
    requests: list[Received] = field(default_factory=list)

    def accepted(self, path: str | None = None) -> list[Received]:
        return [r for r in self.requests if r.status == 200 and path in (None, r.path)]

    def attempts(self, path: str | None = None) -> list[Received]:
        return [r for r in self.requests if path in (None, r.path)]


@asynccontextmanager
async def webhook_receiver(
    port: int | None = None, receiver: Receiver | None = None
) -> AsyncIterator[Receiver]:
    """A receiver on `port` (a free one by default); pass `receiver` to go on recording into
    one that was stopped (a receiver that goes down and comes back)."""
    port = port or free_port()
    receiver = receiver or Receiver(url=f"http://127.0.0.1:{port}")

    async def hook(request: Request) -> Response:
        body = await request.body()
        seen = Received(request.url.path, dict(request.headers), body, None)
        receiver.requests.append(seen)
        if receiver.mode == "hang":
            await asyncio.sleep(receiver.hang_seconds)
            return Response(status_code=200)
        seen.status = 200 if receiver.mode == "ok" else 500
        return Response(status_code=seen.status)

    app = Starlette(routes=[Route("/{name}", hook, methods=["POST"])])
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=5
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        yield receiver
    finally:
        server.should_exit = True
        await task


@dataclass
class Connection:
    path: str
    opened: float
    closed: float | None = None


@dataclass
class Dribbler:
    """A hostile receiver: it starts a 200 answer and then sends one header byte every
    `every` seconds, never finishing, until the sender hangs up. Records each connection."""

    url: str
    every: float = 0.1
    connections: list[Connection] = field(default_factory=list)

    def open(self, prefix: str = "/") -> list[Connection]:
        return [c for c in self.connections if c.closed is None and c.path.startswith(prefix)]

    def most_at_once(self, prefix: str = "/") -> int:
        """The most connections under `prefix` that were open at the same moment."""
        marks = sorted(
            m
            for c in self.connections
            if c.path.startswith(prefix)
            for m in ((c.opened, 1), (c.closed if c.closed is not None else float("inf"), -1))
        )
        most = now = 0
        for _, step in marks:
            now += step
            most = max(most, now)
        return most


@asynccontextmanager
async def dribbling_receiver(every: float = 0.1) -> AsyncIterator[Dribbler]:
    """A `Dribbler` on a free loopback port (raw TCP: no HTTP server would answer so badly)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        parts = line.split()
        seen = Connection(parts[1].decode("latin-1") if len(parts) > 1 else "", time.monotonic())
        dribbler.connections.append(seen)
        # the rest of the request is read (and dropped) until the sender hangs up
        drain = asyncio.create_task(_until_closed(reader, seen))
        try:
            writer.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            while not drain.done():
                await writer.drain()
                await asyncio.wait([drain], timeout=dribbler.every)
                writer.write(b"a")
        except OSError:
            pass
        finally:
            if seen.closed is None:
                seen.closed = time.monotonic()
            drain.cancel()
            writer.close()

    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            await serve(reader, writer)
        except asyncio.CancelledError:
            # only the teardown below cancels: end as a finished task, since Python 3.11's
            # stream callback calls `exception()` on the task and logs a cancelled one's
            writer.close()
        finally:
            handlers.discard(task)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    dribbler = Dribbler(url=f"http://127.0.0.1:{port}")
    try:
        yield dribbler
    finally:
        server.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


async def _until_closed(reader: asyncio.StreamReader, seen: Connection) -> None:
    try:
        while await reader.read(65536):
            pass
    except OSError:
        pass
    # the moment the sender hung up, not when the dribble next notices
    seen.closed = time.monotonic()
