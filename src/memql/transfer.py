"""`memql export` / `memql import`: a project's memories as JSON lines, every version included.

Vectors are not exported: they belong to one model's space, and the importing side embeds the
content again with its configured embedder. Ids, timestamps and the version chain are kept, so
an export imported into an empty project is the same memory store.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import IO

from memql.codec import memory_from_dict, memory_to_dict
from memql.db import transfer as db_transfer
from memql.db.pool import Conn
from memql.embeddings import Embedder
from memql.errors import BadInput
from memql.model import Memory

BATCH = 64


def to_line(memory: Memory) -> str:
    record = memory_to_dict(memory)
    del record["project_id"]  # the importing side names the project
    return json.dumps(record, ensure_ascii=False)


def from_line(line: str, project_id: uuid.UUID, number: int) -> Memory:
    try:
        return memory_from_dict(json.loads(line), project_id=project_id)
    except (KeyError, ValueError, TypeError) as exc:
        raise BadInput(f"line {number}: not a memql export record ({exc!r})") from None


async def export(conn: Conn, project_id: uuid.UUID, out: IO[str]) -> int:
    count = 0
    async for memory in db_transfer.every_memory(conn, project_id):
        out.write(to_line(memory) + "\n")
        count += 1
    return count


async def _batches(lines: Iterable[str], project_id: uuid.UUID) -> AsyncIterator[list[Memory]]:
    batch: list[Memory] = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            batch.append(from_line(line, project_id, number))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def import_(
    conn: Conn, project_id: uuid.UUID, lines: Iterable[str], embedder: Embedder
) -> tuple[int, int]:
    """Insert every record not already present, in one transaction; (imported, skipped)."""
    imported = skipped = 0
    async with conn.transaction():
        async for batch in _batches(lines, project_id):
            vectors = await embedder.embed([m.content for m in batch])
            for memory, vector in zip(batch, vectors, strict=True):
                if await db_transfer.insert_imported(conn, memory, vector, embedder.model):
                    imported += 1
                else:
                    skipped += 1
    return imported, skipped
