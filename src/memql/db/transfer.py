"""The SQL of export and import, on system connections: every version of a project's memories
out, exported memories in as they were."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memql.db.memories import MEMORY_COLUMNS, memory_from_row
from memql.db.pool import Conn
from memql.embeddings import Vector
from memql.model import Memory


async def every_memory(conn: Conn, project_id: uuid.UUID) -> AsyncIterator[Memory]:
    """Every version of every memory of a project, oldest first, streamed."""
    async with conn.cursor(name="memql_export", row_factory=dict_row) as cur:
        await cur.execute(
            f"select {MEMORY_COLUMNS} from memories m where m.project_id = %s"
            " order by m.created_at, m.id",
            (project_id,),
        )
        async for row in cur:
            yield memory_from_row(row)


IMPORT = """
    insert into memories (
        id, project_id, scope, owner_id, kind, content, key, category, pinned,
        source_thread_ids, source, created_by, created_at, updated_at, expires_at,
        invalidated_at, invalidation_reason, supersedes, superseded_by, embedding_model,
        embedding, occurred_at)
    values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
        %s, %s, %s)
    on conflict (id) do nothing
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
                (
                    memory.id,
                    memory.project_id,
                    memory.scope.value,
                    memory.owner_id,
                    memory.kind.value,
                    memory.content,
                    memory.key,
                    memory.category,
                    memory.pinned,
                    list(memory.source_thread_ids),
                    Jsonb(memory.source) if memory.source is not None else None,
                    memory.created_by,
                    memory.created_at,
                    memory.updated_at,
                    memory.expires_at,
                    memory.invalidated_at,
                    memory.invalidation_reason,
                    memory.supersedes,
                    memory.superseded_by,
                    model,
                    embedding,
                    memory.occurred_at,
                )
                for memory, embedding in zip(memories, embeddings, strict=True)
            ],
        )
        return cur.rowcount
