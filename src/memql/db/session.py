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
) -> None:
    """Scope this transaction to `principal` (row-level security policies read these values)
    and apply `settings` to it, in one statement that also checks the principal's credential:
    when its key was revoked, or its project lost its entitlement or was deleted, the statement
    fails with `InvalidAuthorizationSpecification` (010_credential_check.sql) and the
    transaction runs nothing more. In pipeline mode the statement is only queued."""
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


STALE_CREDENTIAL = "the credential was revoked or its project has no memory"


class Sessions:
    """The transactions of one pool."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Conn]:
        """A pooled connection for a principal's work, with the database's failures translated:
        a stale credential is Unauthenticated; no connection within the pool's wait, or one
        lost, is ServiceUnavailable (HTTP 503)."""
        conn: Conn | None = None
        try:
            async with self._pool.connection() as conn:
                yield conn
        except pg_errors.InvalidAuthorizationSpecification:
            raise Unauthenticated(STALE_CREDENTIAL) from None
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
        self, principal: Principal, settings: Sequence[tuple[str, str]] = ()
    ) -> AsyncIterator[Conn]:
        """A transaction on behalf of `principal`: every request-path write runs in one, so
        row-level security sees the principal's project and user. The binding statement also
        checks the credential again (a key revoked, an entitlement withdrawn since the
        principal was resolved or cached): nothing is read or written for a stale one."""
        async with self._connection() as conn, conn.transaction():
            await bind_principal(conn, principal, settings)
            try:
                yield conn
            except pg_errors.UniqueViolation as exc:
                raise Conflict(
                    "another live memory holds that key; retire or supersede it first"
                ) from exc

    @asynccontextmanager
    async def read(
        self, principal: Principal, settings: Sequence[tuple[str, str]] = ()
    ) -> AsyncIterator[Conn]:
        """Reads on behalf of `principal` without a transaction's own round trips: the
        connection is in pipeline mode, outside any explicit transaction, so the binding and
        every statement of the block run in one implicit transaction, which ends when the block
        does (PostgreSQL's extended protocol commits at the pipeline's sync). The binding is
        sent with the block's first statement, in the same round trip; when the credential no
        longer holds it fails and the statements after it are not run (Unauthenticated). Only
        for reads: nothing is written in such a block."""
        async with self._connection() as conn:
            await conn.set_autocommit(True)
            try:
                async with conn.pipeline():
                    await bind_principal(conn, principal, settings)
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
