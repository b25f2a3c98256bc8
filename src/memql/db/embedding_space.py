"""SQL of embedding spaces: the space the database records, the project-scope vector index of a
space, and moving stored vectors from one model to another (`memql reembed`).

System-level work, not on behalf of one principal: it runs on its own connections and sees
every project's memories.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from psycopg import sql as psql

from memql.db.pool import Conn
from memql.embeddings import Vector

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


# --- the recorded space and its project-scope index ------------------------------------


async def embedding_space(conn: Conn) -> tuple[str, int] | None:
    cur = await conn.execute("select model, dimensions from embedding_space")
    row = await cur.fetchone()
    return (row[0], int(row[1])) if row else None


def ann_index_name(dimensions: int) -> str:
    return f"memories_project_ann_{int(dimensions)}"


async def ensure_ann_index(conn: Conn, dimensions: int) -> bool:
    """Build (once) the HNSW index of project-scope vectors of `dimensions`; True when made.

    An expression index per dimension: the `embedding` column has no fixed dimension, so that a
    change of model needs no table rewrite. Its predicate names only constants, so plans with
    bound parameters (generic, prepared) can use it too. Built concurrently, so writes go on
    meanwhile; `conn` must be in autocommit mode.
    """
    name = ann_index_name(dimensions)
    cur = await conn.execute(
        "select i.indisvalid from pg_class c join pg_index i on i.indexrelid = c.oid"
        " where c.relname = %s",
        (name,),
    )
    if (row := await cur.fetchone()) is not None:
        if not row[0]:
            # a concurrent build that failed leaves an invalid index behind, which is never used
            raise RuntimeError(
                f"the index {name} is invalid (an interrupted build): drop it with"
                f" `drop index concurrently {name}` and restart to rebuild it"
            )
        return False
    statement = psql.SQL(
        "create index concurrently if not exists {name} on memories using hnsw"
        " ((embedding::vector({dims})) vector_cosine_ops)"
        " where scope = 'project' and vector_dims(embedding) = {dims}"
    ).format(name=psql.Identifier(name), dims=psql.Literal(int(dimensions)))
    await conn.execute(statement)
    return True


async def record_embedding_space(conn: Conn, model: str, dimensions: int) -> None:
    await conn.execute(
        "insert into embedding_space (model, dimensions) values (%s, %s)"
        " on conflict (singleton) do nothing",
        (model, dimensions),
    )
