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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import unquote, urlsplit

from redis import asyncio as aioredis
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

log = logging.getLogger(__name__)

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
SENTINEL_PORT = 26379
# seconds between two questions to the Sentinels: where is the master now?
MASTER_CHECK_SECONDS = 0.5


def is_sentinel(url: str) -> bool:
    return urlsplit(url).scheme in SENTINEL_SCHEMES


def sentinel_parts(url: str) -> tuple[list[tuple[str, int]], str, int]:
    """The Sentinels' addresses, the service name and the database of a Sentinel URL."""
    parts = urlsplit(url)
    hosts = parts.netloc.rsplit("@", 1)[-1]
    sentinels = []
    for host in hosts.split(","):
        name, _, port = host.rpartition(":") if ":" in host else (host, "", "")
        sentinels.append((name or host, int(port) if port else SENTINEL_PORT))
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError("a Sentinel URL names its service: redis+sentinel://host:26379/mymaster")
    return sentinels, unquote(path[0]), int(path[1]) if len(path) > 1 else 0


def redis_from_url(url: str, **kwargs: Any) -> aioredis.Redis:
    """A client of the server `url` names, or of the Sentinels' current master; `kwargs` go to
    every connection (timeouts, retries)."""
    if not is_sentinel(url):
        return aioredis.Redis.from_url(url, **kwargs)
    parts = urlsplit(url)
    sentinels, service, db = sentinel_parts(url)
    timeouts = {k: v for k, v in kwargs.items() if k.endswith("timeout")}
    sentinel = Sentinel(sentinels, sentinel_kwargs=timeouts)
    if parts.password is not None:
        kwargs["password"] = unquote(parts.password)
    if parts.username:
        kwargs["username"] = unquote(parts.username)
    if parts.scheme.startswith("rediss"):
        kwargs["ssl"] = True
    # redis-py leaves master_for unannotated: it builds its `redis_class`, a Redis by default
    return cast(aioredis.Redis, sentinel.master_for(service, db=db, **kwargs))


async def close(client: aioredis.Redis) -> None:
    """Close `client`; for a client of the Sentinels, their connections too (redis-py's
    `aclose` leaves them open, each to be collected with a ResourceWarning)."""
    try:
        await client.aclose()
    finally:
        pool = client.connection_pool
        if isinstance(pool, SentinelConnectionPool):
            for sentinel in pool.sentinel_manager.sentinels:
                await sentinel.aclose()


async def watch_master(
    client: aioredis.Redis,
    moved: Callable[[], None],
    where: Callable[[], tuple[str, int] | None] = lambda: None,
    every: float = MASTER_CHECK_SECONDS,
) -> None:
    """For a client of the Sentinels, until cancelled: ask them for the master every `every`
    seconds; idle connections to any other server are closed (redis-py's
    `get_master_address`), and when `where()` (the address of a connection held open) is not
    the master, `moved()` is called and this returns. For a client of one server, returns at
    once."""
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
