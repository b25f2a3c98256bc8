"""The save algorithm, run under the owner's lock in the caller's transaction: a live memory
with the same key is superseded; otherwise a same-kind near-duplicate that `dedup.may_absorb`
accepts absorbs the save; otherwise the memory is inserted. Each write records its event."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memql import dedup
from memql.db import events as db_events
from memql.db import memories as db_memories
from memql.db.pool import Conn
from memql.embeddings import Vector
from memql.model import (
    Memory,
    NearDuplicate,
    NewMemory,
    Principal,
    SaveOutcome,
    SaveResult,
    Scope,
)
from memql.settings import Settings

NEAR_DUPLICATES_REPORTED = 5


async def emit(
    conn: Conn,
    principal: Principal,
    type: str,
    memory: Memory,
    payload: dict[str, Any] | None = None,
) -> None:
    """Record a write's event, in the write's transaction."""
    await db_events.insert_event(
        conn,
        principal,
        type=type,
        scope=memory.scope,
        memory_id=memory.id,
        payload=payload or {},
    )


class Saving:
    """The save algorithm of one embedding model, with the thresholds of `settings`."""

    def __init__(self, settings: Settings, model: str) -> None:
        self._model = model
        self._absorb_threshold = settings.absorb_threshold
        self._near_duplicate_threshold = settings.near_duplicate_threshold
        self._source_thread_ids = settings.limits.source_thread_ids

    async def save_locked(
        self, conn: Conn, principal: Principal, new: NewMemory, vector: Vector
    ) -> SaveResult:
        scope = new.scope or Scope.USER
        if new.key is not None:
            current = await db_memories.get_live_by_key(conn, principal, scope, new.key)
            if current is not None:
                if current.expires_at is not None and current.expires_at <= datetime.now(UTC):
                    await db_memories.invalidate(conn, current.id, "expired", at_expiry=True)
                else:
                    return await self.replace(conn, principal, current, new, vector)
        near = await self.near_duplicates(conn, principal, scope, vector, new.content)
        if new.key is None:
            target = next(
                (
                    d
                    for d in near
                    if d.memory.kind is new.kind
                    # two dated events are two events, however alike their words
                    and d.memory.occurred_at == new.occurred_at
                    and dedup.may_absorb(
                        d.memory.content,
                        new.content,
                        d.similarity,
                        self._absorb_threshold,
                    )
                ),
                None,
            )
            if target is not None:
                return await self._absorb(
                    conn,
                    principal,
                    target.memory,
                    new,
                    target.similarity,
                    tuple(d for d in near if d is not target),
                )
        created = await db_memories.insert_memory(
            conn, principal, new, scope=scope, embedding=vector, model=self._model
        )
        await emit(
            conn, principal, "memory.created", created, {"memory": db_events.snapshot(created)}
        )
        return SaveResult(SaveOutcome.CREATED, created, tuple(near))

    async def near_duplicates(
        self,
        conn: Conn,
        principal: Principal,
        scope: Scope,
        vector: Vector,
        content: str,
        *,
        exclude: Sequence[uuid.UUID] = (),
    ) -> list[NearDuplicate]:
        """Live memories of the owner that say nearly the same thing as `content`, most similar
        first: those above the near-duplicate bar, and those it seems to contradict (opposite
        polarity) from a lower bar, since a negation moves a sentence's embedding a long way."""
        bar = self._near_duplicate_threshold
        candidates = await db_memories.near_duplicates(
            conn,
            principal,
            scope,
            vector,
            self._model,
            threshold=min(bar, dedup.CONTRADICTION_FLOOR),
            limit=2 * NEAR_DUPLICATES_REPORTED,
            exclude=exclude,
        )
        return [
            d
            for d in candidates
            if d.similarity >= bar or dedup.contradicts(d.memory.content, content, d.similarity)
        ][:NEAR_DUPLICATES_REPORTED]

    async def _absorb(
        self,
        conn: Conn,
        principal: Principal,
        existing: Memory,
        new: NewMemory,
        similarity: float,
        others: tuple[NearDuplicate, ...],
    ) -> SaveResult:
        merged = tuple(dict.fromkeys(existing.source_thread_ids + new.source_thread_ids))
        # over the cap, the newest provenance wins
        merged = merged[-self._source_thread_ids :]
        absorbed = await db_memories.absorb(conn, existing.id, merged, new.pinned)
        await emit(
            conn,
            principal,
            "memory.absorbed",
            existing,
            {
                # the absorbed text is kept so nothing said is lost
                "absorbedContent": new.content,
                "absorbedSourceThreadIds": list(new.source_thread_ids),
                "absorbedSource": new.source,
                "similarity": similarity,
            },
        )
        return SaveResult(SaveOutcome.ABSORBED, absorbed, others)

    async def replace(
        self, conn: Conn, principal: Principal, old: Memory, new: NewMemory, vector: Vector
    ) -> SaveResult:
        """Retire `old` as superseded and insert `new` as its next version, in this transaction."""
        new_id = uuid.uuid4()
        retired = await db_memories.invalidate(conn, old.id, "superseded", superseded_by=new_id)
        created = await db_memories.insert_memory(
            conn,
            principal,
            new,
            scope=old.scope,
            embedding=vector,
            model=self._model,
            memory_id=new_id,
            supersedes=old.id,
        )
        await emit(
            conn,
            principal,
            "memory.superseded",
            created,
            {"memory": db_events.snapshot(created), "supersededId": str(old.id)},
        )
        near = await self.near_duplicates(
            conn, principal, old.scope, vector, new.content, exclude=[created.id]
        )
        return SaveResult(SaveOutcome.SUPERSEDED, created, tuple(near), superseded=retired)
