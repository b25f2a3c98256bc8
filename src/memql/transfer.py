"""`memql export` / `memql import`: a project's memories as JSON lines, every version included.

Vectors are not exported: they belong to one model's space, and the importing side embeds the
content again with its configured embedder. Ids, timestamps and the version chain are kept, so
an export imported into an empty project is the same memory store.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import asdict
from datetime import datetime
from typing import IO, Any

from memql.db import repository as repo
from memql.db.repository import Conn
from memql.embeddings import Embedder
from memql.errors import BadInput
from memql.model import Kind, Memory, Scope

BATCH = 64


def to_line(memory: Memory) -> str:
    record = asdict(memory)
    record.pop("project_id")
    record.update(
        id=str(memory.id),
        scope=memory.scope.value,
        kind=memory.kind.value,
        source_thread_ids=list(memory.source_thread_ids),
        supersedes=str(memory.supersedes) if memory.supersedes else None,
        superseded_by=str(memory.superseded_by) if memory.superseded_by else None,
    )
    for name in ("created_at", "updated_at", "expires_at", "invalidated_at"):
        value = record[name]
        record[name] = value.isoformat() if value else None
    return json.dumps(record, ensure_ascii=False)


def from_line(line: str, project_id: uuid.UUID, number: int) -> Memory:
    try:
        r: dict[str, Any] = json.loads(line)

        def when(name: str) -> datetime | None:
            return datetime.fromisoformat(r[name]) if r.get(name) else None

        def ident(name: str) -> uuid.UUID | None:
            return uuid.UUID(r[name]) if r.get(name) else None

        created_at, updated_at = when("created_at"), when("updated_at")
        if created_at is None or updated_at is None:
            raise ValueError("created_at and updated_at are required")
        return Memory(
            id=uuid.UUID(r["id"]),
            project_id=project_id,
            scope=Scope(r["scope"]),
            owner_id=str(r["owner_id"]),
            kind=Kind(r["kind"]),
            content=str(r["content"]),
            key=r.get("key"),
            category=str(r.get("category") or "general"),
            pinned=bool(r.get("pinned", False)),
            source_thread_ids=tuple(r.get("source_thread_ids") or ()),
            source=r.get("source"),
            created_by=str(r.get("created_by") or r["owner_id"]),
            created_at=created_at,
            updated_at=updated_at,
            expires_at=when("expires_at"),
            invalidated_at=when("invalidated_at"),
            invalidation_reason=r.get("invalidation_reason"),
            supersedes=ident("supersedes"),
            superseded_by=ident("superseded_by"),
            embedding_model=str(r.get("embedding_model") or ""),
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise BadInput(f"line {number}: not a memql export record ({exc})") from None


async def export(conn: Conn, project_id: uuid.UUID, out: IO[str]) -> int:
    count = 0
    async for memory in repo.every_memory(conn, project_id):
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
                if await repo.insert_imported(conn, memory, vector, embedder.model):
                    imported += 1
                else:
                    skipped += 1
    return imported, skipped
