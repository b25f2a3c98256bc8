"""The connection pool; pgvector is registered on every pooled connection."""

from __future__ import annotations

from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool


async def _configure(conn: AsyncConnection) -> None:
    await register_vector_async(conn)
    # register_vector_async ran a query; leave the connection idle, not inside a transaction
    await conn.commit()


async def open_pool(url: str, *, min_size: int = 2, max_size: int = 10) -> AsyncConnectionPool:
    pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        configure=_configure,
        open=False,
        name="memql",
    )
    await pool.open(wait=True, timeout=30)
    return pool
