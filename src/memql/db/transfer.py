"""The SQL of export and import, on system connections: every version of a project's memories
out, exported memories in as they were."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence

from psycopg.rows import dict_row

from memql.db.pool import Conn
from memql.db.rows import MEMORY_COLUMNS, column_value, memory_from_row
from memql.embeddings import Vector
from memql.model import MEMORY_FIELDS, Memory


async def every_memory(
    conn: Conn, project_id: uuid.UUID, *, vectors: bool = False
) -> AsyncIterator[tuple[Memory, Vector | None]]:
    """Every version of every memory of a project, oldest first, streamed; each with its
    stored vector when `vectors`, else None."""
    vector = ", m.embedding" if vectors else ""
    # in binary: a vector read from its text costs about 200 us, from its binary form 3 us
    async with conn.cursor(name="memql_export", row_factory=dict_row, binary=True) as cur:
        await cur.execute(
            f"select {MEMORY_COLUMNS}{vector} from memories m where m.project_id = %s"
            " order by m.created_at, m.id",
            (project_id,),
        )
        async for row in cur:
            yield memory_from_row(row), row["embedding"].to_numpy() if vectors else None


async def version_count(conn: Conn, project_id: uuid.UUID) -> int:
    """How many versions of memories the project holds (what `every_memory` yields)."""
    cur = await conn.execute("select count(*) from memories where project_id = %s", (project_id,))
    row = await cur.fetchone()
    return int(row[0]) if row else 0


# an exported memory goes in as it was, every field in its column, with the importing model
_STORED = [name for name in MEMORY_FIELDS if name != "embedding_model"]
IMPORT = f"""
    insert into memories ({", ".join(_STORED)}, embedding_model, embedding)
    values ({", ".join(["%s"] * (len(_STORED) + 2))})
    on conflict (project_id, id) do nothing
"""


async def insert_imported(
    conn: Conn, memories: Sequence[Memory], embeddings: Sequence[Vector], model: str
) -> int:
    """Insert exported memories as they were (ids, times, chains), in one round trip (psycopg
    pipelines `executemany`); those whose id exists are left as they are. How many went in."""
    async with conn.cursor() as cur:
        await cur.executemany(
            IMPORT,
            [
                (*(column_value(getattr(memory, name)) for name in _STORED), model, embedding)
                for memory, embedding in zip(memories, embeddings, strict=True)
            ],
        )
        return cur.rowcount


async def held_elsewhere(
    conn: Conn, ids: Sequence[uuid.UUID], project_id: uuid.UUID
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Those of `ids` that a project other than `project_id` holds, with that project."""
    cur = await conn.execute(
        "select id, project_id from memories where id = any(%s) and project_id <> %s",
        (list(ids), project_id),
    )
    return [(row[0], row[1]) for row in await cur.fetchall()]
