"""A Redis pub/sub backend for `broadcaster` that reports its failures.

broadcaster 0.3.1's own Redis backend loses its listener silently: the task dies with the
connection, and a subscribe racing the listener's start can leave it idle for good (it checks
for subscriptions before the first one is registered, then waits for a signal that never
comes). This backend keeps the same interface, listens whenever a channel is subscribed, never
retries behind the caller's back (messages sent meanwhile would be lost unnoticed), and calls
`on_failure` when its connection breaks, so the bus can reconnect and resynchronise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from broadcaster import BroadcastBackend, Event
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from memql import redis_client
from memql.redis_client import redis_from_url, watch_master

log = logging.getLogger(__name__)


class RedisPubSubBackend(BroadcastBackend):
    def __init__(self, url: str, on_failure: Callable[[BaseException], None]) -> None:
        self._conn = redis_from_url(
            url, retry=Retry(NoBackoff(), 0), socket_connect_timeout=2, health_check_interval=0
        )
        self._pubsub = self._conn.pubsub()
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._listening = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._on_failure = on_failure

    async def connect(self) -> None:
        await self._conn.ping()
        self._listener = asyncio.create_task(self._listen(), name="memql-redis-listener")
        # behind Sentinel: a failover is a failure of this connection, even while the former
        # master still answers
        self._watch = asyncio.create_task(
            watch_master(
                self._conn,
                lambda: self._on_failure(ConnectionError("the Redis master moved")),
                self._subscribed_at,
            ),
            name="memql-redis-master-watch",
        )

    def _subscribed_at(self) -> tuple[str, int] | None:
        connection = self._pubsub.connection
        if connection is None or not connection.host:
            return None
        return (connection.host, int(connection.port))

    async def disconnect(self) -> None:
        for task in (self._listener, self._watch):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        try:
            await self._pubsub.aclose()
        finally:
            await redis_client.close(self._conn)

    async def subscribe(self, channel: str) -> None:
        await self._pubsub.subscribe(channel)
        self._listening.set()

    async def unsubscribe(self, channel: str) -> None:
        await self._pubsub.unsubscribe(channel)

    async def publish(self, channel: str, message: Any) -> None:
        await self._conn.publish(channel, message)

    async def next_published(self) -> Event:
        return await self._queue.get()

    async def _listen(self) -> None:
        try:
            while True:
                await self._listening.wait()
                if not self._pubsub.subscribed:
                    self._listening.clear()
                    continue
                message = await self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=1.0
                )
                if message is not None and message["type"] == "message":
                    self._queue.put_nowait(
                        Event(message["channel"].decode(), message["data"].decode())
                    )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("Redis subscription connection lost: %s", exc)
            self._on_failure(exc)
