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

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from memql.db.pool import SYSTEM_ROLE, Conn
from memql.errors import Conflict, CredentialsUnavailable, ServiceUnavailable, Unauthenticated
from memql.model import Principal

DATABASE_AWAY = "the memory store cannot be reached right now; try again shortly"

log = logging.getLogger(__name__)


async def bind_principal(
    conn: Conn, principal: Principal, settings: Sequence[tuple[str, str]] = ()
) -> bool:
    """Scope this transaction to `principal` (row-level security policies read these values)
    and apply `settings` to it, in one round trip. False when the principal's credential no
    longer holds: its key was revoked, or its project lost its entitlement or was deleted."""
    extra = "".join(f", set_config(%(s{i})s, %(v{i})s, true)" for i in range(len(settings)))
    params: dict[str, Any] = {
        "project_id": str(principal.project_id),
        "user_id": principal.user_id,
        "key_id": principal.key_id,
    }
    for i, (name, value) in enumerate(settings):
        params[f"s{i}"], params[f"v{i}"] = name, value
    cur = await conn.execute(
        f"""
        select set_config('memql.project_id', %(project_id)s, true),
            set_config('memql.user_id', %(user_id)s, true){extra},
            exists(
                select from projects p
                where p.id = %(project_id)s::uuid and p.memory_enabled
                  and (%(key_id)s::uuid is null or exists(
                      select from api_keys k
                      where k.id = %(key_id)s and k.project_id = p.id and k.revoked_at is null))
            )
        """,
        params,
    )
    row = await cur.fetchone()
    return bool(row and row[-1])


class Sessions:
    """The transactions of one pool."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    @asynccontextmanager
    async def bound(
        self, principal: Principal, settings: Sequence[tuple[str, str]] = ()
    ) -> AsyncIterator[Conn]:
        """A transaction on behalf of `principal`: every request-path query runs in one, so
        row-level security sees the principal's project and user. The binding statement also
        checks the credential again (a key revoked, an entitlement withdrawn since the
        principal was resolved or cached): nothing is read or written for a stale one. A
        database that gives no connection within the pool's wait, or loses it, is
        ServiceUnavailable (HTTP 503)."""
        conn: Conn | None = None
        try:
            async with self._pool.connection() as conn, conn.transaction():
                if not await bind_principal(conn, principal, settings):
                    raise Unauthenticated("the credential was revoked or its project has no memory")
                try:
                    yield conn
                except pg_errors.UniqueViolation as exc:
                    raise Conflict(
                        "another live memory holds that key; retire or supersede it first"
                    ) from exc
        except PoolTimeout as exc:
            log.warning("no database connection: %s", exc)
            raise ServiceUnavailable(DATABASE_AWAY) from None
        except psycopg.OperationalError as exc:
            if conn is None or not conn.broken:
                raise
            log.warning("the database connection was lost: %s", exc)
            raise ServiceUnavailable(DATABASE_AWAY) from None

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
