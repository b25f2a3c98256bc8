"""Work one instance does for all: the relay and the webhook deliverer.

Each runs on its own connection and leads while that connection's session holds its PostgreSQL
advisory lock; the other instances ask again every `poll` seconds and take over when the
holder's connection ends (its process died, or it lost the database). Whatever stops a leader
(a lost connection, an error) is logged and the work starts again after a backoff: 0.2 s, then
doubling to 5 s while it keeps failing, and 0.2 s again once it has led.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator
from typing import TypeVar

import psycopg

from memql.db import events as db_events

log = logging.getLogger(__name__)

FIRST_DELAY = 0.2
MOST_DELAY = 5.0


class Supervised:
    """A piece of leader work: subclasses implement `lead`, which returns only by failing."""

    #: what the logs call it ("relay")
    label = "leader"

    def __init__(self) -> None:
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        #: "leader" while `lead` holds the lock and works, else "standby"
        self.role = "standby"

    async def lead(self) -> None:
        raise NotImplementedError

    def stood_down(self) -> None:
        """Forget what belonged to the lead that just ended (called before the next try)."""

    async def run(self) -> None:
        delay = FIRST_DELAY
        while True:
            failure: Exception | None = None
            try:
                await self.lead()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = exc
            if self.role == "leader":
                log.warning("%s %s gave up leadership", self.label, self.name)
                delay = FIRST_DELAY  # a lead that ended starts the backoff over
            if failure is not None:
                log.warning("%s stopped (%s); restarting in %.1fs", self.label, failure, delay)
            self.role = "standby"
            self.stood_down()
            await asyncio.sleep(delay)
            delay = min(delay * 2, MOST_DELAY)


async def take_lock(conn: psycopg.AsyncConnection, lock: int, poll: float) -> None:
    """Return once this connection's session holds `lock`; another instance leads while it
    holds it, so ask again every `poll` seconds."""
    while not await db_events.try_lock(conn, lock):  # noqa: ASYNC110
        await asyncio.sleep(poll)


S = TypeVar("S", bound=Supervised)


@contextlib.asynccontextmanager
async def running(worker: S) -> AsyncIterator[S]:
    """`worker` running in a task for the duration of the block."""
    task = asyncio.create_task(worker.run(), name=f"memql-{worker.label.replace(' ', '-')}")
    try:
        yield worker
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
