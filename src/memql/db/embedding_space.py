"""SQL for moving stored vectors from one embedding model to another (`memql reembed`).

System-level work, not on behalf of one principal: it runs on its own connection made from the
database URL and sees every project's memories.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from memql.embeddings import Vector

Conn = AsyncConnection[Any]

# a row is pending when its vector is not of the target space and no shadow vector of it is ready
_PENDING = """
    (embedding_model <> %(model)s or vector_dims(embedding) <> %(dimensions)s)
    and next_embedding_model is distinct from %(model)s
"""


async def pending_count(conn: Conn, model: str, dimensions: int) -> int:
    cur = await conn.execute(
        f"select count(*) from memories where {_PENDING}",
        {"model": model, "dimensions": dimensions},
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def next_batch(
    conn: Conn, model: str, dimensions: int, after: uuid.UUID | None, size: int
) -> list[tuple[uuid.UUID, str]]:
    """The next `size` pending rows (id, content) after `after`, in id order."""
    cur = await conn.execute(
        f"""
        select id, content from memories
        where {_PENDING} and (%(after)s::uuid is null or id > %(after)s)
        order by id
        limit %(size)s
        """,
        {"model": model, "dimensions": dimensions, "after": after, "size": size},
    )
    return [(row[0], row[1]) for row in await cur.fetchall()]


async def store_next(conn: Conn, model: str, rows: Sequence[tuple[uuid.UUID, Vector]]) -> None:
    """Keep each row's vector of the target model beside the one recall uses now."""
    async with conn.cursor() as cur:
        await cur.executemany(
            "update memories set next_embedding = %s, next_embedding_model = %s where id = %s",
            [(vector, model, memory_id) for memory_id, vector in rows],
        )


async def hold_writes(conn: Conn) -> None:
    """Block writes to memories until this transaction ends (reads go on)."""
    await conn.execute("lock table memories in share row exclusive mode")


async def swap(conn: Conn, model: str, dimensions: int) -> int:
    """Move every row with a ready shadow vector to it and record the new space; return how many
    rows moved."""
    cur = await conn.execute(
        """
        update memories set embedding = next_embedding, embedding_model = next_embedding_model,
            next_embedding = null, next_embedding_model = null
        where next_embedding_model = %s
        """,
        (model,),
    )
    moved = cur.rowcount
    # shadow vectors of another target (an abandoned earlier reembed) are stale now
    await conn.execute(
        "update memories set next_embedding = null, next_embedding_model = null"
        " where next_embedding_model is not null"
    )
    await conn.execute(
        """
        insert into embedding_space (model, dimensions) values (%s, %s)
        on conflict (singleton) do update
            set model = excluded.model, dimensions = excluded.dimensions, recorded_at = now()
        """,
        (model, dimensions),
    )
    return moved
