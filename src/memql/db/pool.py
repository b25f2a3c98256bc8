"""Connections, one function per role; nothing else in memql connects to PostgreSQL.

- `open_pool`: request-path connections, acting as `memql_app`, which row-level security binds
  to one principal per transaction;
- `system_connection`: work on behalf of no single user (the relay, the deliverer, export and
  import), acting as `memql_system`;
- `owner_connection`: as the database URL's own user, for what only the owner of the schema
  does: migrations, indexes, tenant administration (projects, keys, webhooks from the command
  line), and listening for credential changes.
"""

from __future__ import annotations

from typing import Any

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

APP_ROLE = "memql_app"
SYSTEM_ROLE = "memql_system"

# a connection of either role; every SQL function takes one its caller has put in a transaction
Conn = AsyncConnection[Any]


async def _configure(conn: Conn) -> None:
    await register_vector_async(conn)
    await conn.execute(f"set role {APP_ROLE}")
    # leave the connection idle, not inside a transaction
    await conn.commit()


async def _reset(conn: Conn) -> None:
    # a block cancelled before it put its connection back in its usual mode
    # (`Sessions.read` turns autocommit on for its pipeline)
    if conn.autocommit:
        await conn.set_autocommit(False)


async def open_pool(
    url: str, *, min_size: int = 2, max_size: int = 10, wait: float = 5.0
) -> AsyncConnectionPool:
    """`wait`: seconds a request waits for a connection before it is refused (503); short,
    so a database outage fails requests fast instead of piling them up.

    Every connection goes back through `reset`, and with a reset function psycopg_pool
    returns a connection in its own worker task, not in the task that used it: without one,
    `putconn` awaits the pool's lock and the next waiter's lock in the caller's task, and a
    cancellation landing there (GraphQL cancels a request's other fields when one fails; a
    client that hangs up cancels its request) drops the connection on the floor. Idle in
    PostgreSQL, counted as open by the pool, never lent again: after a burst the pool was
    left with none available and every request waited for nothing."""
    pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        configure=_configure,
        reset=_reset,
        open=False,
        name="memql",
        timeout=wait,
    )
    await pool.open(wait=True, timeout=30)
    return pool


async def system_connection(url: str, **kwargs: Any) -> AsyncConnection[Any]:
    """A connection for work on behalf of no single user (it sees every tenant's rows)."""
    conn = await psycopg.AsyncConnection.connect(url, **kwargs)
    try:
        await register_vector_async(conn)
        await conn.execute(f"set role {SYSTEM_ROLE}")
        if not conn.autocommit:
            await conn.commit()
    except BaseException:
        # cancelled (a leader stopping at shutdown) or failed half-way: the caller never gets
        # the connection, so it would stay open until collected
        await conn.close()
        raise
    return conn


async def owner_connection(url: str, **kwargs: Any) -> AsyncConnection[Any]:
    """A connection as the URL's user (the owner of memql's tables)."""
    return await psycopg.AsyncConnection.connect(url, **kwargs)
