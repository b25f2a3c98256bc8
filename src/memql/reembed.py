"""`memql reembed`: move every stored memory to the configured embedding model.

Safe while servers keep writing, and resumable: batches of shadow vectors commit one by one
(a killed run keeps what it did), passes repeat until no row is left (rows written meanwhile are
picked up), and only the final swap holds writes back, briefly, to move every row and record
the new space in one transaction. Servers keep recalling in the old space until the swap; after
it they refuse to start with the old configuration, so restart them with the new one.
"""

from __future__ import annotations

import logging
import sys
import uuid
from dataclasses import dataclass

import psycopg
from tqdm import tqdm

from memql.db import embedding_space as space
from memql.db.pool import system_connection
from memql.embeddings import Embedder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReembedResult:
    previous: tuple[str, int] | None
    embedded: int
    moved: int


async def reembed(
    url: str, embedder: Embedder, *, batch_size: int = 64, progress: bool = True
) -> ReembedResult:
    model, dimensions = embedder.model, embedder.dimensions
    # a system connection: every tenant's memories move
    async with await system_connection(url, autocommit=True) as conn:
        previous = await space.embedding_space(conn)
        total = await space.pending_count(conn, model, dimensions)
        bar = tqdm(
            total=total,
            unit="memory",
            desc=f"re-embedding with {model}",
            disable=not progress,
            file=sys.stderr,
        )
        embedded = 0
        try:
            # passes until one finds nothing: rows saved during a pass are caught by the next
            while True:
                found = await _one_pass(conn, embedder, batch_size, bar)
                embedded += found
                if found == 0:
                    break
            async with conn.transaction():
                await space.hold_writes(conn)
                # a save may have landed between the last pass and the lock
                embedded += await _one_pass(conn, embedder, batch_size, bar)
                moved = await space.swap(conn, model, dimensions)
        finally:
            bar.close()
        try:
            await space.ensure_ann_index(conn, dimensions)
        except (psycopg.Error, RuntimeError) as exc:
            # the move is done; only large shared scopes lose speed until the index exists
            log.warning("project-scope vector index not built: %s", exc)
    return ReembedResult(previous, embedded, moved)


async def _one_pass(conn: psycopg.AsyncConnection, embedder: Embedder, size: int, bar: tqdm) -> int:
    model, dimensions = embedder.model, embedder.dimensions
    after: uuid.UUID | None = None
    count = 0
    while batch := await space.next_batch(conn, model, dimensions, after, size):
        vectors = await embedder.embed([content for _, content in batch])
        rows = [(memory_id, v) for (memory_id, _), v in zip(batch, vectors, strict=True)]
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            async with conn.transaction():
                await space.store_next(conn, model, rows)
        else:
            await space.store_next(conn, model, rows)
        after = batch[-1][0]
        count += len(batch)
        if bar.total is not None and bar.n + len(batch) > bar.total:
            bar.total = bar.n + len(batch)
        bar.update(len(batch))
    return count
