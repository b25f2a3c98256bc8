"""`memql export` / `memql import`: a project's memories as JSON lines, every version included.

By default vectors are not exported: they belong to one model's space, and the importing side
embeds the content again with its configured embedder. `export(vectors=True)` (`memql export
--vectors`) adds each version's stored vector (`embedding`: little-endian float32, base64); an
import takes it as it is wherever the record's `embedding_model` is the importing embedder's,
so a move between instances of one model skips the model, and embeds the rest. Ids, timestamps
and the version chain are kept, so an export imported into an empty project is the same memory
store.

An import into a project other than the one exported, on the server that holds the original, is
refused before anything is embedded (`refuse_foreign`): ids are global.

An import is atomic: the whole file is written in one transaction. Each record is held to the
rules the API applies to what it stores (`validation`: text and JSON nothing downstream can
hold, the limits, the shapes of key, category, thread ids, source and user id) before its batch
is embedded; the first record that breaks one ends the import with an error naming its line and
field, and nothing of the file is written.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import IO, Any, NamedTuple

import numpy as np

from memql.access.identity import canonical_user_id
from memql.db import transfer as db_transfer
from memql.db.pool import Conn
from memql.embeddings import Embedder, Vector
from memql.errors import BadInput, MemqlError
from memql.model import Memory, Scope
from memql.rules import validation
from memql.rules.codec import UnreadableField, memory_from_dict, memory_to_dict
from memql.settings import LIMITS, Limits

BATCH = 128
# far above any record the limits allow (8,192 characters of content, 16 KiB of source, 100
# thread ids of 256 characters)
LINE_MAX_CHARS = 1024 * 1024
#: a record's optional stored vector (of its `embedding_model`): little-endian float32, base64
VECTOR = "embedding"
#: told how many more records an export wrote or an import stored (a progress bar's `update`)
Progress = Callable[[int], object]


@dataclass(frozen=True)
class Record:
    """A line of an export, read and checked: the memory, and the vector it carries, if any."""

    memory: Memory
    vector: Vector | None
    line: int


class Imported(NamedTuple):
    imported: int
    #: records whose id was already present
    skipped: int
    #: records the embedder embedded (the rest came with a vector of its model)
    embedded: int


def to_line(memory: Memory, vector: Vector | None = None) -> str:
    record = memory_to_dict(memory)
    del record["project_id"]  # the importing side names the project
    if vector is not None:
        stored = np.asarray(vector, dtype="<f4").tobytes()
        record[VECTOR] = base64.b64encode(stored).decode("ascii")
    return json.dumps(record, ensure_ascii=False)


def from_line(
    line: str, project_id: uuid.UUID, number: int, limits: Limits | None = None
) -> Record:
    """The memory a line of an export holds (and its vector), checked as the API checks what
    it stores; BadInput naming the line (and the field) otherwise."""
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
        memory = storable_record(record, memory, limits or LIMITS)
        vector = read_vector(record.get(VECTOR))
    except MemqlError as exc:
        raise BadInput(f"line {number}: {exc.message}", line=number, **exc.extensions) from None
    return Record(memory, vector, number)


def read_vector(text: Any) -> Vector | None:
    """A record's `embedding`, unit length; None when it has none. BadInput for anything but
    the base64 of finite float32 values, not all zero."""
    if text is None:
        return None
    refusal = BadInput(
        f"`{VECTOR}` is the base64 of little-endian float32 values, finite and not all zero",
        field=VECTOR,
    )
    if not isinstance(text, str):
        raise refusal
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise refusal from None
    if not raw or len(raw) % 4:
        raise refusal
    vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    if not np.isfinite(vector).all() or norm == 0:
        raise refusal
    return vector / np.float32(norm)


def kept_vectors(batch: list[Record], embedder: Embedder) -> list[Vector | None]:
    """Each record's own vector where it is of `embedder`'s model (None where the model must
    embed it); BadInput for a vector of that model with other dimensions."""
    kept: list[Vector | None] = []
    for record in batch:
        vector = record.vector
        if vector is not None and record.memory.embedding_model != embedder.model:
            vector = None  # another model's space: embedded anew
        if vector is not None and len(vector) != embedder.dimensions:
            raise BadInput(
                f"line {record.line}: `{VECTOR}` has {len(vector)} dimensions; the model"
                f" {embedder.model} has {embedder.dimensions}",
                line=record.line,
                field=VECTOR,
            )
        kept.append(vector)
    return kept


async def filled(
    batch: list[Record], kept: list[Vector | None], embedder: Embedder
) -> list[Vector]:
    """`kept` with the model's vectors where it has none, embedded in one call."""
    missing = [i for i, vector in enumerate(kept) if vector is None]
    texts = [batch[i].memory.content for i in missing]
    embedded = iter(await embedder.embed(texts) if texts else [])
    return [next(embedded) if vector is None else vector for vector in kept]


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


async def export(
    conn: Conn,
    project_id: uuid.UUID,
    out: IO[str],
    *,
    vectors: bool = False,
    progress: Progress | None = None,
) -> int:
    """Every version of every memory of the project to `out`, a JSON line each (with its stored
    vector when `vectors`); how many. `progress` is told of each line written."""
    count = 0
    async for memory, vector in db_transfer.every_memory(conn, project_id, vectors=vectors):
        out.write(to_line(memory, vector) + "\n")
        count += 1
        if progress is not None:
            progress(1)
    return count


async def version_count(conn: Conn, project_id: uuid.UUID) -> int:
    """How many lines an export of the project writes (as it stands now)."""
    return await db_transfer.version_count(conn, project_id)


def record_count(lines: Iterable[str]) -> int:
    """How many records an import of `lines` reads (its lines that are not blank)."""
    return sum(1 for line in lines if line.strip())


async def _batches(
    lines: Iterable[str], project_id: uuid.UUID, limits: Limits
) -> AsyncIterator[list[Record]]:
    batch: list[Record] = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            batch.append(from_line(line, project_id, number, limits))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def refuse_foreign(conn: Conn, batch: list[Record], project_id: uuid.UUID) -> None:
    """BadInput when another project of this server holds a record's id, before the batch is
    embedded. Ids are global and an import keeps them (so that importing a file again adds
    nothing): a record of another project cannot go in as itself, and is not copied under a
    new id either, since a second run would then copy everything again."""
    held = await db_transfer.held_elsewhere(conn, [r.memory.id for r in batch], project_id)
    if not held:
        return
    holders = dict(held)
    first = next(r for r in batch if r.memory.id in holders)  # the first line, in file order
    memory_id, other, line = first.memory.id, holders[first.memory.id], first.line
    raise BadInput(
        f"line {line}: memory {memory_id} belongs to another project on this server"
        f" ({other}); an export imports into the project it came from, or into a project of"
        " another server (ids are kept, and are unique per server). Nothing was imported",
        line=line,
        field="id",
    )


async def import_(
    conn: Conn,
    project_id: uuid.UUID,
    lines: Iterable[str],
    embedder: Embedder,
    limits: Limits | None = None,
    *,
    progress: Progress | None = None,
) -> Imported:
    """Insert every record not already present, in one transaction. A record that breaks a
    rule raises BadInput and nothing is written. A record's own vector is taken where it is of
    `embedder`'s model; the model embeds the others. Batches overlap: while one batch's rows go
    in, the model embeds the next. `progress` is told of the records of each batch written."""
    imported = skipped = embedded = 0

    async def write(batch: list[Record], vectors: Awaitable[list[Vector]]) -> None:
        nonlocal imported, skipped
        memories = [record.memory for record in batch]
        added = await db_transfer.insert_imported(conn, memories, await vectors, embedder.model)
        imported += added
        skipped += len(batch) - added
        if progress is not None:
            progress(len(batch))

    async with conn.transaction():
        pending: tuple[list[Record], asyncio.Future[list[Vector]]] | None = None
        try:
            async for batch in _batches(lines, project_id, limits or LIMITS):
                await refuse_foreign(conn, batch, project_id)
                kept = kept_vectors(batch, embedder)
                embedded += sum(vector is None for vector in kept)
                embedding = asyncio.ensure_future(filled(batch, kept, embedder))
                if pending is not None:
                    await write(*pending)
                pending = (batch, embedding)
            if pending is not None:
                await write(*pending)
                pending = None
        finally:
            if pending is not None:
                pending[1].cancel()
    return Imported(imported, skipped, embedded)
