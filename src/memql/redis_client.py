"""A Redis client from `REDIS_URL`: one server (`redis://host:6379/0`, `rediss://...`), or the
master a group of Sentinels names (`redis+sentinel://s1:26379,s2:26379/<service>/<db>`;
`rediss+sentinel://` for TLS to the servers; a password in the URL is the servers').

Through Sentinel every new connection asks the Sentinels where the master is now. After a
failover the former master may go on answering, as a master, for seconds before the Sentinels
turn it into a replica and close its clients: a connection opened before the failover would
keep publishing and subscribing there, apart from the instances that reconnected. So a client
of the Sentinels also asks them every `MASTER_CHECK_SECONDS` (`watch_master`): idle
connections to a former master are closed, and a long-lived one (a subscription) is reported
so its owner reconnects.

Redis Cluster (`redis+cluster://n1:6379,n2:6379/`; `rediss+cluster://` for TLS; a password in
the URL is the nodes'): any node named is a seed, the client learns the rest of the cluster
from it. The broadcast then publishes with `SPUBLISH` and subscribes with `SSUBSCRIBE`
(sharded pub/sub, Redis 7.0+), so a message travels only within the shard that owns its
channel's slot (realtime/redis_cluster_backend.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import unquote, urlsplit

from redis import asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

log = logging.getLogger(__name__)

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
SENTINEL_PORT = 26379
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
REDIS_PORT = 6379
# seconds between two questions to the Sentinels: where is the master now?
MASTER_CHECK_SECONDS = 0.5


def is_sentinel(url: str) -> bool:
    return urlsplit(url).scheme in SENTINEL_SCHEMES


def is_cluster(url: str) -> bool:
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def _hosts(netloc: str, default_port: int) -> list[tuple[str, int]]:
    hosts = []
    for host in netloc.rsplit("@", 1)[-1].split(","):
        name, _, port = host.rpartition(":") if ":" in host else (host, "", "")
        hosts.append((name or host, int(port) if port else default_port))
    return hosts


def cluster_nodes(url: str) -> list[tuple[str, int]]:
    """The seed nodes of a cluster URL. A cluster has one database, 0: a URL naming another
    is refused rather than silently sharing database 0."""
    parts = urlsplit(url)
    path = [p for p in parts.path.split("/") if p]
    if path not in ([], ["0"]):
        raise ValueError(
            "a Redis Cluster has database 0 only: redis+cluster://host:6379,host:6380/"
        )
    nodes = _hosts(parts.netloc, REDIS_PORT)
    if not all(name for name, _ in nodes):
        raise ValueError("a cluster URL names its nodes: redis+cluster://host:6379,host:6380/")
    return nodes


def connection_kwargs(url: str) -> dict[str, Any]:
    """What a URL of many servers (Sentinel's, a cluster's) says of every connection: the
    servers' credentials and TLS."""
    parts = urlsplit(url)
    kwargs: dict[str, Any] = {}
    if parts.password is not None:
        kwargs["password"] = unquote(parts.password)
    if parts.username:
        kwargs["username"] = unquote(parts.username)
    if parts.scheme.startswith("rediss"):
        kwargs["ssl"] = True
    return kwargs


def cluster_from_url(url: str, **kwargs: Any) -> RedisCluster:
    """A client of the cluster whose seeds `url` names; `kwargs` go to every connection."""
    seeds = [ClusterNode(host, port) for host, port in cluster_nodes(url)]
    return RedisCluster(startup_nodes=seeds, **connection_kwargs(url), **kwargs)


def sentinel_parts(url: str) -> tuple[list[tuple[str, int]], str, int]:
    """The Sentinels' addresses, the service name and the database of a Sentinel URL."""
    parts = urlsplit(url)
    sentinels = _hosts(parts.netloc, SENTINEL_PORT)
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError("a Sentinel URL names its service: redis+sentinel://host:26379/mymaster")
    return sentinels, unquote(path[0]), int(path[1]) if len(path) > 1 else 0


def client_from_url(url: str, **kwargs: Any) -> aioredis.Redis | RedisCluster:
    """A client of whatever `url` names: one server, the Sentinels' master or a cluster, for
    commands on keys. Every command memql sends on keys names one key (a position kept for
    own-write reads), so on a cluster each goes to its slot's node and none needs a hash tag."""
    if is_cluster(url):
        return cluster_from_url(url, **kwargs)
    return redis_from_url(url, **kwargs)


def redis_from_url(url: str, **kwargs: Any) -> aioredis.Redis:
    """A client of the server `url` names, or of the Sentinels' current master; `kwargs` go to
    every connection (timeouts, retries). Not of a cluster (`cluster_from_url`)."""
    if is_cluster(url):
        raise ValueError("a cluster URL needs a cluster client (cluster_from_url)")
    if not is_sentinel(url):
        return aioredis.Redis.from_url(url, **kwargs)
    sentinels, service, db = sentinel_parts(url)
    timeouts = {k: v for k, v in kwargs.items() if k.endswith("timeout")}
    sentinel = Sentinel(sentinels, sentinel_kwargs=timeouts)
    kwargs.update(connection_kwargs(url))
    # redis-py leaves master_for unannotated: it builds its `redis_class`, a Redis by default
    return cast(aioredis.Redis, sentinel.master_for(service, db=db, **kwargs))


async def close(client: aioredis.Redis | RedisCluster) -> None:
    """Close `client`; for a client of the Sentinels, their connections too (redis-py's
    `aclose` leaves them open, each to be collected with a ResourceWarning). For a cluster's,
    every node's: after a command met a broken connection, redis-py 8.1 marks the client as
    to be initialized again, and its `aclose` then closes nothing."""
    try:
        await client.aclose()
    finally:
        if isinstance(client, RedisCluster):
            await client.nodes_manager.aclose()
            await client.nodes_manager.aclose("startup_nodes")
        pool = None if isinstance(client, RedisCluster) else client.connection_pool
        if isinstance(pool, SentinelConnectionPool):
            for sentinel in pool.sentinel_manager.sentinels:
                await sentinel.aclose()


async def watch_master(
    client: aioredis.Redis | RedisCluster,
    moved: Callable[[], None],
    where: Callable[[], tuple[str, int] | None] = lambda: None,
    every: float = MASTER_CHECK_SECONDS,
) -> None:
    """For a client of the Sentinels, until cancelled: ask them for the master every `every`
    seconds; idle connections to any other server are closed (redis-py's
    `get_master_address`), and when `where()` (the address of a connection held open) is not
    the master, `moved()` is called and this returns. For a client of one server or of a
    cluster (which follows its slots itself), returns at once."""
    if isinstance(client, RedisCluster):
        return
    pool = client.connection_pool
    if not isinstance(pool, SentinelConnectionPool):
        return
    while True:
        await asyncio.sleep(every)
        try:
            master = await pool.get_master_address()
        except Exception as exc:  # the Sentinels do not answer: the connections say the rest
            log.debug("the Sentinels did not name the master: %s", exc)
            continue
        here = where()
        if here is not None and (str(here[0]), int(here[1])) != (str(master[0]), int(master[1])):
            log.warning("the Redis master moved to %s:%s", *master)
            moved()
            return
