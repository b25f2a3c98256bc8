"""Transactions on pooled connections: on behalf of one principal (the request path, where
row-level security sees the principal's project and user) or of the system (every row, for
callers that filter by project themselves).

The database's own failures are translated here, where connections are taken, into the domain's
errors: no connection within the pool's wait or a connection lost is `ServiceUnavailable`, a
key held by another live memory is `Conflict`, a credential that no longer holds is
`Unauthenticated`; credentials that cannot be looked up are `CredentialsUnavailable`. Nothing
above this module catches psycopg's errors.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from memql.db.pool import SYSTEM_ROLE, Conn
from memql.errors import (
    Conflict,
    CredentialsUnavailable,
    DeadlineExceeded,
    ServiceUnavailable,
    Unauthenticated,
)
from memql.model import Principal

DATABASE_AWAY = "the memory store cannot be reached right now; try again shortly"

log = logging.getLogger(__name__)


async def bind_principal(
    conn: Conn,
    principal: Principal,
    settings: Sequence[tuple[str, str]] = (),
    *,
    distributed: bool = False,
) -> None:
    """Scope this transaction to `principal` (row-level security policies read these values)
    and apply `settings` to it, in one statement that also checks the principal's credential:
    when its key was revoked or has expired, or its project lost its entitlement or was
    deleted, the statement fails with `InvalidAuthorizationSpecification`
    (010_credential_check.sql, 015_key_names_and_expiry.sql) and the transaction runs nothing
    more. In pipeline mode the statement is only queued.

    `distributed` (a Citus coordinator): the values are set with `SET LOCAL` statements, which
    Citus sends on to the workers (`citus.propagate_set_commands = 'local'`), where the shards'
    policies read them; a `set_config` would stay on the coordinator. They are pipelined, and
    the transaction must be an explicit one."""
    if distributed:
        await _bind_distributed(conn, principal, settings)
        return
    extra = "".join(f", set_config(%(s{i})s, %(v{i})s, true)" for i in range(len(settings)))
    params: dict[str, Any] = {
        "project_id": str(principal.project_id),
        "user_id": principal.user_id,
        "key_id": principal.key_id,
    }
    for i, (name, value) in enumerate(settings):
        params[f"s{i}"], params[f"v{i}"] = name, value
    await conn.execute(
        f"""
        select set_config('memql.project_id', %(project_id)s, true),
            set_config('memql.user_id', %(user_id)s, true){extra},
            memql_credential_holds(%(project_id)s::uuid, %(key_id)s::uuid)
        """,
        params,
    )


# a setting's name as SET takes it (memql's own names only: never a caller's input)
_SETTING_NAME = re.compile(r"[a-z_]+(\.[a-z_]+)?")


async def _bind_distributed(
    conn: Conn, principal: Principal, settings: Sequence[tuple[str, str]]
) -> None:
    values = [
        ("memql.project_id", str(principal.project_id)),
        ("memql.user_id", principal.user_id),
        *settings,
    ]
    async with conn.pipeline():
        await conn.execute("set local citus.propagate_set_commands = 'local'")
        for name, value in values:
            if not _SETTING_NAME.fullmatch(name):
                raise ValueError(f"not a setting's name: {name!r}")
            # SET takes no parameters: the value goes in as a quoted literal
            await conn.execute(
                sql.SQL("set local {} = {}").format(sql.SQL(name), sql.Literal(value))
            )
        await conn.execute(
            "select memql_credential_holds(%s::uuid, %s::uuid)",
            (principal.project_id, principal.key_id),
        )


async def is_distributed(conn: Conn) -> bool:
    """The database is a Citus coordinator's (memql's tables distributed by project)."""
    cur = await conn.execute("select exists (select from pg_extension where extname = 'citus')")
    row = await cur.fetchone()
    return bool(row and row[0])


def _statement_timeout() -> list[tuple[str, str]]:
    """The transaction's `statement_timeout`: what is left of the request's deadline (each
    statement after the binding is cancelled by PostgreSQL when it would run past it)."""
    left = _remaining()
    return [] if left is None else [("statement_timeout", str(max(1, math.ceil(left * 1000))))]


# work on a connection at a given point of a session's life (after a commit, before a read)
ConnHook = Callable[[Conn], Awaitable[None]]

STALE_CREDENTIAL = "the credential was revoked or has expired, or its project has no memory"
OUT_OF_TIME = (
    "the request used up its time with the database (MEMQL_REQUEST_TIMEOUT_SECONDS);"
    " ask for less in one request"
)
SHARE_TAKEN = (
    "this project is using its whole share of the database connections"
    " (MEMQL_POOL_PROJECT_SHARE); try again shortly"
)

# when the current request's time with the database ends (the event loop's clock); set by
# the transport around one operation, inherited by every field task it starts
_deadline: ContextVar[float | None] = ContextVar("memql_request_deadline", default=None)


@contextmanager
def request_deadline(seconds: float | None) -> Iterator[None]:
    """Bound the database work of what runs inside: every checkout waits at most until the
    deadline, every statement is cancelled by PostgreSQL at it (`statement_timeout`), and once
    it has passed nothing more is started (`DeadlineExceeded`). None: no deadline."""
    when = None if seconds is None else asyncio.get_running_loop().time() + seconds
    token = _deadline.set(when)
    try:
        yield
    finally:
        _deadline.reset(token)


def _remaining() -> float | None:
    """Seconds left before the current request's deadline; None without one."""
    when = _deadline.get()
    if when is None:
        return None
    left = when - asyncio.get_running_loop().time()
    if left <= 0:
        raise DeadlineExceeded(OUT_OF_TIME)
    return left


class ProjectShares:
    """A project's share of the pool: at most `slots` of its requests hold or wait for a
    connection at once, so one busy project leaves the rest of the pool to the others (who
    wait only for their own turn). A project's entry lives while some request of it holds or
    waits for a slot."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._held: dict[uuid.UUID, asyncio.Semaphore] = {}
        self._users: dict[uuid.UUID, int] = {}

    @asynccontextmanager
    async def slot(self, project_id: uuid.UUID, wait: float) -> AsyncIterator[None]:
        semaphore = self._held.get(project_id)
        if semaphore is None:
            semaphore = self._held[project_id] = asyncio.Semaphore(self.slots)
        self._users[project_id] = self._users.get(project_id, 0) + 1
        try:
            try:
                async with asyncio.timeout(wait):
                    await semaphore.acquire()
            except TimeoutError:
                log.warning("project %s waited %.2f s for its share of the pool", project_id, wait)
                raise ServiceUnavailable(SHARE_TAKEN) from None
            try:
                yield
            finally:
                semaphore.release()
        finally:
            left = self._users[project_id] - 1
            if left:
                self._users[project_id] = left
            else:
                del self._users[project_id], self._held[project_id]

    def stats(self) -> dict[str, int]:
        """Requests waiting for their project's share; projects using all of theirs."""
        waiting = sum(max(0, users - self.slots) for users in self._users.values())
        full = sum(1 for s in self._held.values() if s.locked())
        return {"waiting": waiting, "projects_full": full}


class Sessions:
    """The transactions of one pool."""

    def __init__(self, pool: AsyncConnectionPool, *, project_slots: int | None = None) -> None:
        """`project_slots`: connections one project's requests may hold or wait for at once
        (None: the whole pool)."""
        self._pool = pool
        self.shares = ProjectShares(project_slots or pool.max_size)
        # a Citus coordinator (bind_principal's `distributed`): known from the first connection
        self._distributed: bool | None = None

    @property
    def distributed(self) -> bool:
        """The database is a Citus coordinator's (known once a connection was taken)."""
        return bool(self._distributed)

    @asynccontextmanager
    async def _connection(
        self, principal: Principal, wait: float | None = None
    ) -> AsyncIterator[Conn]:
        """A pooled connection for a principal's work, within its project's share of the pool
        and its request's deadline, with the database's failures translated: a stale
        credential is Unauthenticated; no connection within the pool's wait (or `wait`
        seconds, when given), or one lost, is ServiceUnavailable (HTTP 503); the deadline
        passed, DeadlineExceeded."""
        conn: Conn | None = None
        left = _remaining()
        wait = self._pool.timeout if wait is None else wait
        wait = wait if left is None else min(wait, left)
        started = asyncio.get_running_loop().time()
        try:
            async with self.shares.slot(principal.project_id, wait):
                wait -= asyncio.get_running_loop().time() - started
                async with self._pool.connection(timeout=max(wait, 0.001)) as conn:
                    if self._distributed is None:
                        self._distributed = await is_distributed(conn)
                        await conn.commit()
                    yield conn
        except pg_errors.InvalidAuthorizationSpecification:
            raise Unauthenticated(STALE_CREDENTIAL) from None
        except pg_errors.QueryCanceled:
            # statement_timeout: the request's deadline, reached inside PostgreSQL
            raise DeadlineExceeded(OUT_OF_TIME) from None
        except PoolTimeout as exc:
            log.warning("no database connection: %s", exc)
            raise ServiceUnavailable(DATABASE_AWAY) from None
        except psycopg.OperationalError as exc:
            if conn is None or not conn.broken:
                raise
            log.warning("the database connection was lost: %s", exc)
            raise ServiceUnavailable(DATABASE_AWAY) from None

    @asynccontextmanager
    async def bound(
        self,
        principal: Principal,
        settings: Sequence[tuple[str, str]] = (),
        *,
        committed: ConnHook | None = None,
    ) -> AsyncIterator[Conn]:
        """A transaction on behalf of `principal`: every request-path write runs in one, so
        row-level security sees the principal's project and user. The binding statement also
        checks the credential again (a key revoked, an entitlement withdrawn since the
        principal was resolved or cached): nothing is read or written for a stale one.
        `committed` runs on the connection once the transaction has committed."""
        async with self._connection(principal) as conn:
            async with conn.transaction():
                await bind_principal(
                    conn,
                    principal,
                    [*settings, *_statement_timeout()],
                    distributed=bool(self._distributed),
                )
                try:
                    yield conn
                except pg_errors.UniqueViolation as exc:
                    raise Conflict(
                        "another live memory holds that key; retire or supersede it first"
                    ) from exc
            if committed is not None:
                await committed(conn)

    @asynccontextmanager
    async def read(
        self,
        principal: Principal,
        settings: Sequence[tuple[str, str]] = (),
        *,
        wait: float | None = None,
        ready: ConnHook | None = None,
    ) -> AsyncIterator[Conn]:
        """Reads on behalf of `principal` without a transaction's own round trips: the
        connection is in pipeline mode, outside any explicit transaction, so the binding and
        every statement of the block run in one implicit transaction, which ends when the block
        does (PostgreSQL's extended protocol commits at the pipeline's sync). The binding is
        sent with the block's first statement, in the same round trip; when the credential no
        longer holds it fails and the statements after it are not run (Unauthenticated). Only
        for reads: nothing is written in such a block. `wait`: seconds to wait for a
        connection instead of the pool's (for callers that queue rather than fail fast).
        `ready` runs on the connection first, each of its statements a transaction of its own
        (a standby's replay is waited for there: `db/replica.py`)."""
        async with self._connection(principal, wait) as conn:
            if self._distributed:
                # SET LOCAL (the binding on Citus) needs a transaction block of its own
                async with conn.transaction(), conn.pipeline():
                    await bind_principal(
                        conn, principal, [*settings, *_statement_timeout()], distributed=True
                    )
                    yield conn
                return
            await conn.set_autocommit(True)
            try:
                if ready is not None:
                    await ready(conn)
                async with conn.pipeline():
                    await bind_principal(conn, principal, [*settings, *_statement_timeout()])
                    yield conn
            finally:
                if not conn.closed:
                    await conn.set_autocommit(False)

    @asynccontextmanager
    async def lookup(self) -> AsyncIterator[Conn]:
        """A connection to resolve credentials with, before any principal exists, each
        statement its own transaction (no BEGIN and COMMIT round trips). A database that cannot
        answer (within the pool's wait, MEMQL_POOL_TIMEOUT_SECONDS) is CredentialsUnavailable:
        the request is denied."""
        try:
            async with self._pool.connection() as conn:
                await conn.set_autocommit(True)
                try:
                    yield conn
                finally:
                    await conn.set_autocommit(False)
        except (psycopg.Error, PoolTimeout) as exc:
            log.warning("could not resolve credentials: %s", exc)
            raise CredentialsUnavailable("credentials cannot be checked right now") from None

    @asynccontextmanager
    async def system(self) -> AsyncIterator[Conn]:
        """A transaction that sees every row; callers filter by project."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(f"set local role {SYSTEM_ROLE}")
            yield conn
