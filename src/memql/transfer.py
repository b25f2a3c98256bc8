"""`memql export` / `memql import`: a project's memories as JSON lines, every version included.

Vectors are not exported: they belong to one model's space, and the importing side embeds the
content again with its configured embedder. Ids, timestamps and the version chain are kept, so
an export imported into an empty project is the same memory store.

An import is atomic: the whole file is written in one transaction. Each record is held to the
rules the API applies to what it stores (`validation`: text and JSON nothing downstream can
hold, the limits, the shapes of key, category, thread ids, source and user id) before its batch
is embedded; the first record that breaks one ends the import with an error naming its line and
field, and nothing of the file is written.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterable
from dataclasses import replace
from typing import IO, Any

from memql import validation
from memql.access.identity import canonical_user_id
from memql.codec import UnreadableField, memory_from_dict, memory_to_dict
from memql.db import transfer as db_transfer
from memql.db.pool import Conn
from memql.embeddings import Embedder, Vector
from memql.errors import BadInput, MemqlError
from memql.model import Memory, Scope
from memql.settings import LIMITS, Limits

BATCH = 128
# far above any record the limits allow (8,192 characters of content, 16 KiB of source, 100
# thread ids of 256 characters)
LINE_MAX_CHARS = 1024 * 1024


def to_line(memory: Memory) -> str:
    record = memory_to_dict(memory)
    del record["project_id"]  # the importing side names the project
    return json.dumps(record, ensure_ascii=False)


def from_line(
    line: str, project_id: uuid.UUID, number: int, limits: Limits | None = None
) -> Memory:
    """The memory a line of an export holds, checked as the API checks what it stores; BadInput
    naming the line (and the field) otherwise."""
    if len(line) > LINE_MAX_CHARS:
        raise BadInput(f"line {number}: longer than {LINE_MAX_CHARS} characters", line=number)
    try:
        record = json.loads(line)
        if not isinstance(record, dict):
            raise TypeError("a record is a JSON object")
        memory = memory_from_dict(record, project_id=project_id)
    except UnreadableField as exc:
        raise BadInput(f"line {number}: {exc}", line=number, field=exc.field) from None
    except RecursionError:
        raise BadInput(f"line {number}: not a memql export record (nested too deeply)") from None
    except (KeyError, ValueError, TypeError) as exc:  # ValueError: JSON, or an overlong integer
        raise BadInput(f"line {number}: not a memql export record ({exc!r})") from None
    try:
        return storable_record(record, memory, limits or LIMITS)
    except MemqlError as exc:
        raise BadInput(f"line {number}: {exc.message}", line=number, **exc.extensions) from None


def storable_record(record: dict[str, Any], memory: Memory, limits: Limits) -> Memory:
    """`memory` as the API would have stored it, or BadInput naming the record's field."""
    for name, value in record.items():
        validation.storable(value, field=name, limits=limits)
    if not isinstance(memory.source, dict | None):
        raise BadInput("`source` must be a JSON object or null", field="source")
    if not all(isinstance(t, str) for t in memory.source_thread_ids):
        raise BadInput("`source_thread_ids` must be strings", field="source_thread_ids")
    if memory.scope is Scope.PROJECT:
        if memory.owner_id != "":
            raise BadInput("`owner_id` of a project memory is empty", field="owner_id")
        owner = ""
    else:
        try:
            owner = canonical_user_id(memory.owner_id)
        except MemqlError as exc:
            raise BadInput(f"`owner_id`: {exc.message}", field="owner_id") from None
    if (memory.invalidated_at is None) != (memory.invalidation_reason is None):
        raise BadInput(
            "`invalidated_at` and `invalidation_reason` are both set or both null",
            field="invalidation_reason",
        )
    return replace(
        memory,
        owner_id=owner,
        content=validation.content(memory.content, limits),
        key=validation.key(memory.key, limits),
        category=validation.category(memory.category, limits),
        source_thread_ids=validation.thread_ids(memory.source_thread_ids, limits),
        source=validation.source(memory.source, limits),
    )


async def export(conn: Conn, project_id: uuid.UUID, out: IO[str]) -> int:
    count = 0
    async for memory in db_transfer.every_memory(conn, project_id):
        out.write(to_line(memory) + "\n")
        count += 1
    return count


async def _batches(
    lines: Iterable[str], project_id: uuid.UUID, limits: Limits
) -> AsyncIterator[list[Memory]]:
    batch: list[Memory] = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            batch.append(from_line(line, project_id, number, limits))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def import_(
    conn: Conn,
    project_id: uuid.UUID,
    lines: Iterable[str],
    embedder: Embedder,
    limits: Limits | None = None,
) -> tuple[int, int]:
    """Insert every record not already present, in one transaction; (imported, skipped).
    A record that breaks a rule raises BadInput and nothing is written. Batches overlap: while
    one batch's rows go in, the model embeds the next."""
    imported = skipped = 0

    async def write(batch: list[Memory], vectors: Awaitable[list[Vector]]) -> None:
        nonlocal imported, skipped
        added = await db_transfer.insert_imported(conn, batch, await vectors, embedder.model)
        imported += added
        skipped += len(batch) - added

    async with conn.transaction():
        pending: tuple[list[Memory], asyncio.Future[list[Vector]]] | None = None
        try:
            async for batch in _batches(lines, project_id, limits or LIMITS):
                embedding = asyncio.ensure_future(embedder.embed([m.content for m in batch]))
                if pending is not None:
                    await write(*pending)
                pending = (batch, embedding)
            if pending is not None:
                await write(*pending)
                pending = None
        finally:
            if pending is not None:
                pending[1].cancel()
    return imported, skipped
