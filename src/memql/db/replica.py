"""Reads on hot standbys, with every caller's own writes visible to its next read.

With a read URL (`MEMQL_READ_DATABASE_URL`: one or more hot standbys, libpq multi-host
allowed), recall, lists, context blocks and counts run on a standby; everything else stays on
the primary: writes, the credential lookups and their `last_used_at`, the relay, the webhook
deliverer, a stream's horizon and replay, and every advisory (leadership) lock, whose holders
connect with the primary's URL only.

Read-your-writes: right after a write commits, on the same primary connection, the service
reads the primary's WAL insert position (`pg_current_wal_insert_lsn()`, at or past the
commit's record) and keeps it as the principal's last write (`Positions`: in this process, and
in Redis when `REDIS_URL` is set, so every instance knows it). A read of that principal on a
standby first waits, up to `MEMQL_READ_WAIT_SECONDS`, for `pg_last_wal_replay_lsn()` there to
reach it, on the very connection the read then uses (a multi-host URL may reach several
standbys); a standby that does not reach it in time, cannot be reached, refuses the
credential it has not replayed yet, or cancels the read (a conflict with recovery) costs a
read of the primary instead, never an error. When the last write cannot be known (Redis
does not answer; the position could not be read after a commit), the read goes to the
primary.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from memql import metrics
from memql.db import pool as db_pool
from memql.db.pool import Conn
from memql.db.session import Sessions
from memql.errors import ServiceUnavailable, Unauthenticated
from memql.model import Principal

log = logging.getLogger(__name__)

T = TypeVar("T")

# a write whose position is unknown: no standby is taken to have replayed it
UNKNOWN = 2**64 - 1
# seconds a principal's last write is remembered (a standby further behind than this could
# serve an older write of theirs stale: alert on replication lag well below it)
REMEMBER_SECONDS = 600
# principals remembered in one process (the oldest are forgotten first)
REMEMBER_MOST = 100_000
# seconds a standby that could not be reached is left alone before it is tried again
AWAY_SECONDS = 5.0
# seconds between two looks at a standby's replay position while waiting for it
WAIT_STEP = 0.002
# seconds a read waits for a standby connection from its pool
CONNECTION_WAIT = 1.0


def read_conninfo(primary: str, read: str) -> str:
    """The read URL's parameters over the primary's (a read URL may name only its hosts:
    database, user and password then come from `DATABASE_URL`); `target_session_attrs`
    defaults to `prefer-standby`, so a multi-host URL naming the primary too reads there only
    when no standby answers."""
    params: dict[str, Any] = {"target_session_attrs": "prefer-standby"}
    params.update(conninfo_to_dict(read))
    return make_conninfo(primary, **params)


def _key(principal: Principal) -> str:
    return f"{principal.project_id}:{principal.user_id}"


class Positions(Protocol):
    async def record(self, principal: Principal, lsn: int) -> None: ...

    async def last(self, principal: Principal) -> int | None:
        """The principal's last write position; 0 for none known, None when it cannot be
        told (the caller reads the primary)."""
        ...


class LocalPositions:
    """Each principal's last write position in this process, for `REMEMBER_SECONDS`."""

    def __init__(self, most: int = REMEMBER_MOST) -> None:
        self._most = most
        self._positions: OrderedDict[str, tuple[int, float]] = OrderedDict()

    def _put(self, key: str, lsn: int) -> None:
        held = self._positions.pop(key, None)
        if held is not None and held[1] > time.monotonic():
            lsn = max(lsn, held[0])
        self._positions[key] = (lsn, time.monotonic() + REMEMBER_SECONDS)
        while len(self._positions) > self._most:
            self._positions.popitem(last=False)

    def _get(self, key: str) -> int:
        held = self._positions.get(key)
        if held is None or held[1] <= time.monotonic():
            return 0
        return held[0]

    async def record(self, principal: Principal, lsn: int) -> None:
        self._put(_key(principal), lsn)

    async def last(self, principal: Principal) -> int | None:
        return self._get(_key(principal))


# keeps the higher of two positions (16 hex digits each, so they compare as strings)
_KEEP_HIGHER = """
local held = redis.call('GET', KEYS[1])
if (not held) or held < ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
else
    redis.call('EXPIRE', KEYS[1], ARGV[2])
end
"""


class SharedPositions(LocalPositions):
    """Each principal's last write position in Redis, shared by every instance (and in this
    process, which its own writes never wait on Redis for). Redis that does not answer makes
    a principal's position unknown: reads go to the primary until it answers again."""

    def __init__(self, redis_url: str) -> None:
        super().__init__()
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        from memql.redis_client import client_from_url, watch_master

        self._redis = client_from_url(
            redis_url,
            socket_timeout=0.25,
            socket_connect_timeout=0.25,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        self._keep_higher = self._redis.register_script(_KEEP_HIGHER)
        self._away_until = 0.0
        # behind Sentinel: connections to a former master are dropped within a check
        self._watch = asyncio.create_task(
            watch_master(self._redis, lambda: None), name="memql-positions-master-watch"
        )

    async def close(self) -> None:
        self._watch.cancel()
        await asyncio.gather(self._watch, return_exceptions=True)
        from memql import redis_client

        await redis_client.close(self._redis)

    async def record(self, principal: Principal, lsn: int) -> None:
        await super().record(principal, lsn)
        if time.monotonic() < self._away_until:
            return
        try:
            await self._keep_higher(
                keys=[f"memql:written:{_key(principal)}"],
                args=[f"{lsn:016x}", REMEMBER_SECONDS],
            )
        except Exception as exc:  # any failure of Redis: only this instance knows the write
            self._away_until = time.monotonic() + AWAY_SECONDS
            log.warning("Redis did not take a write's position: %s", exc)

    async def last(self, principal: Principal) -> int | None:
        here = self._get(_key(principal))
        if time.monotonic() < self._away_until:
            return None
        try:
            held = await self._redis.get(f"memql:written:{_key(principal)}")
        except Exception as exc:  # Redis away: what other instances wrote is unknown
            self._away_until = time.monotonic() + AWAY_SECONDS
            log.warning("Redis did not say a principal's last write: %s", exc)
            return None
        return max(here, int(held, 16) if held else 0)


@dataclass(frozen=True)
class Standby:
    """The standbys' pool, where each principal's last write stands, and how long a read
    waits for a standby to replay it."""

    pool: AsyncConnectionPool
    positions: Positions
    wait: float


class _NotReplayed(Exception):
    """The standby did not replay the principal's last write in time."""


class Reads:
    """Where reads on behalf of a principal run: a standby that has replayed the principal's
    last write (waiting for it up to `wait` seconds), else the primary (`primary`)."""

    def __init__(
        self,
        primary: Sessions,
        standby: Standby | None = None,
        *,
        project_slots: int | None = None,
    ) -> None:
        """`project_slots`: as the primary's (`Sessions`), for the standbys' pool."""
        self._primary = primary
        self._standby = (
            Sessions(standby.pool, project_slots=project_slots) if standby is not None else None
        )
        self._positions: Positions = standby.positions if standby else LocalPositions()
        self._wait = standby.wait if standby else 0.0
        self._away_until = 0.0
        # per standby server (host, port): a replay position it is known to have reached
        self._replayed: dict[tuple[str, int], int] = {}

    @property
    def on_standby(self) -> bool:
        return self._standby is not None

    async def wrote(self, principal: Principal, conn: Conn) -> None:
        """After a write of `principal` committed on `conn` (the primary): remember where the
        primary's WAL stands now, at or past the commit."""
        if self._standby is None:
            return
        try:
            await conn.set_autocommit(True)
            try:
                cur = await conn.execute("select pg_current_wal_insert_lsn() - '0/0'")
                row = await cur.fetchone()
                lsn = int(row[0]) if row else UNKNOWN
            finally:
                if not conn.closed:
                    await conn.set_autocommit(False)
        except psycopg.Error as exc:
            # the write committed; its position is unknown, so no standby has it
            log.warning("could not read the position of a write: %s", exc)
            lsn = UNKNOWN
        await self._positions.record(principal, lsn)

    async def run(
        self,
        principal: Principal,
        body: Callable[[Conn], Awaitable[T]],
        settings: Sequence[tuple[str, str]] = (),
    ) -> T:
        """`body` on a read connection bound to `principal` (`Sessions.read`): on a standby
        that has the principal's last write, else on the primary. `body` only reads: it may
        run twice (on the standby, then on the primary when the standby fails it)."""
        if self._standby is not None and time.monotonic() >= self._away_until:
            target = await self._positions.last(principal)
            if target is None:
                metrics.STANDBY_READS.labels("primary_unknown").inc()
            else:
                try:
                    result = await self._on_standby(principal, body, settings, target)
                except _NotReplayed:
                    metrics.STANDBY_READS.labels("primary_behind").inc()
                except ServiceUnavailable:
                    self._away_until = time.monotonic() + AWAY_SECONDS
                    log.warning("the standby cannot be reached: reading the primary")
                    metrics.STANDBY_READS.labels("primary_away").inc()
                except (Unauthenticated, psycopg.Error) as exc:
                    # a credential (or project) it has not replayed yet, a read cancelled by
                    # recovery: the primary decides
                    log.debug("the standby refused a read: %s", exc)
                    metrics.STANDBY_READS.labels("primary_refused").inc()
                else:
                    return result
        async with self._primary.read(principal, settings) as conn:
            return await body(conn)

    async def _on_standby(
        self,
        principal: Principal,
        body: Callable[[Conn], Awaitable[T]],
        settings: Sequence[tuple[str, str]],
        target: int,
    ) -> T:
        waited = False

        async def ready(conn: Conn) -> None:
            nonlocal waited
            server = (conn.info.host, conn.info.port)
            if self._replayed.get(server, 0) >= target:
                return
            deadline = time.monotonic() + self._wait
            while True:
                cur = await conn.execute(
                    "select pg_is_in_recovery(), pg_last_wal_replay_lsn() - '0/0'"
                )
                row = await cur.fetchone()
                assert row is not None
                if not row[0]:
                    return  # the read URL reached the primary itself
                replayed = int(row[1] or 0)
                if replayed > self._replayed.get(server, 0):
                    self._replayed[server] = replayed
                if replayed >= target:
                    return
                if time.monotonic() >= deadline:
                    raise _NotReplayed
                waited = True
                await asyncio.sleep(WAIT_STEP)

        assert self._standby is not None
        async with self._standby.read(principal, settings, ready=ready) as conn:
            result = await body(conn)
        metrics.STANDBY_READS.labels("standby_waited" if waited else "standby").inc()
        return result


async def open_standby(
    stack: AsyncExitStack,
    primary_url: str,
    read_url: str | None,
    *,
    redis_url: str | None,
    max_size: int,
    wait: float,
) -> Standby | None:
    """The standbys of a running memql at `read_url` (None without one), their pool and the
    positions closed with `stack`. A standby down at the start only costs reads of the
    primary until it answers."""
    if read_url is None:
        return None
    pool = AsyncConnectionPool(
        read_conninfo(primary_url, read_url),
        min_size=1,
        max_size=max_size,
        # the request role and pgvector, as on the primary's pool
        configure=db_pool._configure,
        open=False,
        name="memql-read",
        timeout=CONNECTION_WAIT,
    )
    await pool.open(wait=False)
    stack.push_async_callback(pool.close)
    positions: Positions
    if redis_url is not None:
        shared = SharedPositions(redis_url)
        stack.push_async_callback(shared.close)
        positions = shared
    else:
        positions = LocalPositions()
    return Standby(pool, positions, wait)
