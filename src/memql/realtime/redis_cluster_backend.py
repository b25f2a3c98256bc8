"""Sharded pub/sub on Redis Cluster (`REDIS_URL=redis+cluster://...`, Redis 7.0+) for
`broadcaster`.

Classic `PUBLISH` on a cluster reaches every node, so each node carries every project's
messages and adding nodes adds no capacity. `SPUBLISH` goes to the node owning the channel's
slot (and its replicas) only, and a subscriber listens there (`SSUBSCRIBE`).

Publishing goes through redis-py's `RedisCluster`, which routes by slot and follows `MOVED`.
Subscribing does not use redis-py's async `ClusterPubSub` (8.x): it reads its nodes one after
another, each read waiting up to its timeout, so a message on the third node waits for the
first two; and after a slot moves it resubscribes only at its next slot-map refresh, without
telling the caller that messages may have been lost meanwhile. Instead this backend holds one
connection per node owning a subscribed channel, each read by its own task, and says exactly
when a subscription lapsed:

- the node gave up the channel's slot (a slot moved, or the node became a replica): it sends
  `sunsubscribe` for the channel. That channel alone is lost (`on_lost(channel)`): the bus
  subscribes it again where the slot map now places it, then its subscribers read the event
  log from their last cursor (realtime/bus.py);
- a node's connection broke (the node died, a failover): `on_failure`, and the bus reconnects
  everything, as for one server.

Like the one-server backend it never retries behind the caller's back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from broadcaster import BroadcastBackend, Event
from redis import asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from memql import redis_client
from memql.redis_client import cluster_from_url, connection_kwargs

log = logging.getLogger(__name__)

# seconds a node's reader waits for a message before looking again
_READ_WAIT = 1.0


class _Node:
    """One node's subscriptions: its own connection and the task reading it."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self.pubsub: PubSub = client.pubsub()
        self.reader: asyncio.Task[None] | None = None
        # channel -> unsubscribes asked for whose confirmation has not come yet
        self.leaving: dict[str, int] = {}

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)
        try:
            await self.pubsub.aclose()
        finally:
            await self.client.aclose()


class ShardedPubSubBackend(BroadcastBackend):
    def __init__(
        self,
        url: str,
        on_failure: Callable[[BaseException], None],
        on_lost: Callable[[str], None],
    ) -> None:
        self._kwargs: dict[str, Any] = {
            "retry": Retry(NoBackoff(), 0),
            "socket_connect_timeout": 2,
            "health_check_interval": 0,
        }
        self._cluster = cluster_from_url(url, **self._kwargs)
        self._node_kwargs = {**connection_kwargs(url), **self._kwargs}
        self._nodes: dict[str, _Node] = {}
        # channel -> the node it is subscribed on
        self._where: dict[str, str] = {}
        # a subscription was lost since the slot map was last read
        self._stale = False
        self._lock = asyncio.Lock()
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._on_failure = on_failure
        self._on_lost = on_lost

    async def connect(self) -> None:
        await self._cluster.initialize()

    async def disconnect(self) -> None:
        nodes, self._nodes = list(self._nodes.values()), {}
        self._where.clear()
        try:
            # every node's, even after one failed to close
            await asyncio.gather(*(node.close() for node in nodes), return_exceptions=True)
        finally:
            await redis_client.close(self._cluster)

    async def subscribe(self, channel: str) -> None:
        # one at a time: redis-py's PubSub opens its connection on its first command, and two
        # first commands at once would each open one (a subscription on the lost one is lost)
        async with self._lock:
            await self._subscribe(channel)

    async def _subscribe(self, channel: str) -> None:
        if self._stale:
            # the node that gave the channel up knows where its slot went; the map may not yet
            self._stale = False
            await self._cluster.nodes_manager.initialize()
        owner = self._cluster.get_node_from_key(channel)
        if owner is None:  # no node serves the slot now: the cluster is reconfiguring
            raise ConnectionError(f"no Redis node serves channel {channel}")
        node = self._nodes.get(owner.name)
        if node is None:
            client = aioredis.Redis(host=owner.host, port=int(owner.port), **self._node_kwargs)
            node = self._nodes[owner.name] = _Node(client)
        self._where[channel] = owner.name
        await node.pubsub.ssubscribe(channel)
        if node.reader is None:
            node.reader = asyncio.create_task(
                self._read(owner.name, node), name=f"memql-redis-shard-reader-{owner.name}"
            )

    async def unsubscribe(self, channel: str) -> None:
        async with self._lock:
            name = self._where.pop(channel, None)
            node = self._nodes.get(name) if name is not None else None
            if node is not None:
                node.leaving[channel] = node.leaving.get(channel, 0) + 1
                await node.pubsub.sunsubscribe(channel)

    async def publish(self, channel: str, message: Any) -> None:
        await self._cluster.spublish(channel, message)

    async def next_published(self) -> Event:
        return await self._queue.get()

    async def _read(self, name: str, node: _Node) -> None:
        try:
            while True:
                message = await node.pubsub.get_message(timeout=_READ_WAIT)
                if message is None:
                    continue
                kind = message["type"]
                channel = message["channel"].decode() if message["channel"] else ""
                if kind == "smessage":
                    self._queue.put_nowait(Event(channel, message["data"].decode()))
                elif kind == "sunsubscribe" and node.leaving.get(channel):
                    # the confirmation of an unsubscribe
                    node.leaving[channel] -= 1
                    if not node.leaving[channel]:
                        del node.leaving[channel]
                elif kind == "sunsubscribe" and self._where.get(channel) == name:
                    # not asked for: the node no longer serves the channel's slot
                    log.warning(
                        "Redis node %s gave up channel %s; subscribing again", name, channel
                    )
                    del self._where[channel]
                    self._stale = True
                    # forget it here too, or a reconnect would subscribe it on this node again
                    node.pubsub.shard_channels.pop(message["channel"], None)
                    self._on_lost(channel)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("Redis node %s: subscription connection lost: %s", name, exc)
            self._on_failure(exc)
