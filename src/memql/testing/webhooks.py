"""A real HTTP receiver of webhooks: it answers 200, 500, or too late, as told, and records
every request."""

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
