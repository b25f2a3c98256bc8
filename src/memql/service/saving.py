"""The save algorithm, run under the owner's lock in the caller's transaction: it reads the holder
of the save's key and the nearest memories, asks `rules.saving.decide` whether the save
supersedes, is absorbed or is created, and writes that with its event."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memql.db import memories as db_memories
from memql.db.events import PendingEvents
from memql.db.pool import Conn
from memql.embeddings import Vector
from memql.model import (
    EventType,
    InvalidationReason,
    Memory,
    NearDuplicate,
    Principal,
    SaveOutcome,
    SaveResult,
    Scope,
)
from memql.requests import NewMemory
from memql.rules import codec
from memql.rules.saving import Absorb, Create, Thresholds, decide, near_duplicates, plan_batch
from memql.settings import Settings


def emit(
    events: PendingEvents,
    type: EventType,
    memory: Memory,
    payload: dict[str, Any] | None = None,
) -> None:
    """Record a write's event, written at the end of the write's transaction."""
    events.add(type, memory.scope, memory.id, payload)


class Saving:
    """The save algorithm of one embedding model, with the thresholds of `settings`."""

    def __init__(self, settings: Settings, model: str) -> None:
        self._model = model
        self._thresholds = Thresholds(
            absorb=settings.absorb_threshold,
            near_duplicate=settings.near_duplicate_threshold,
            reported=settings.limits.near_duplicates_reported,
            source_thread_ids=settings.limits.source_thread_ids,
        )

    async def save_all_locked(
        self,
        conn: Conn,
        events: PendingEvents,
        news: Sequence[NewMemory],
        vectors: Sequence[Vector],
    ) -> list[SaveResult]:
        """Save `news` in order, as `save_locked` one after the other would. When no input
        names a key and none would be absorbed, by a stored memory or by an earlier input of
        the batch, every outcome is CREATED: that is decided from one search of the stored
        near-duplicates of all the inputs, and the rows and their events are written in one
        round trip each. Otherwise the inputs are saved one after the other."""
        principal = events.principal
        plans = None
        # a key's holder is read, and superseded, one save at a time
        if len(news) > 1 and all(n.key is None for n in news):
            stored = await self._stored_near_duplicates(conn, principal, news, vectors)
            plans = plan_batch(news, stored, _similarities(vectors), self._thresholds)
        if plans is None:
            return [
                await self.save_locked(conn, events, new, vector)
                for new, vector in zip(news, vectors, strict=True)
            ]
        created = await db_memories.insert_memories(
            conn, principal, news, embeddings=vectors, model=self._model
        )
        for m in created:
            emit(events, EventType.CREATED, m, {"memory": codec.snapshot(m)})
        return [
            SaveResult(
                SaveOutcome.CREATED,
                memory,
                tuple(
                    d
                    if isinstance(d, NearDuplicate)
                    else NearDuplicate(created[d.index], d.similarity)
                    for d in near
                ),
            )
            for memory, near in zip(created, plans, strict=True)
        ]

    async def _stored_near_duplicates(
        self,
        conn: Conn,
        principal: Principal,
        news: Sequence[NewMemory],
        vectors: Sequence[Vector],
    ) -> list[list[NearDuplicate]]:
        """Each input's nearest stored memories, as `save_locked` searches them: one statement
        per scope."""
        scopes = [n.scope or Scope.USER for n in news]
        stored: list[list[NearDuplicate]] = [[] for _ in news]
        for scope in set(scopes):
            indexes = [i for i, sc in enumerate(scopes) if sc is scope]
            found = await db_memories.near_duplicates_of_each(
                conn,
                principal,
                scope,
                [vectors[i] for i in indexes],
                self._model,
                threshold=self._thresholds.floor,
                limit=self._thresholds.searched,
            )
            for i, of_i in zip(indexes, found, strict=True):
                stored[i] = of_i
        return stored

    async def save_locked(
        self, conn: Conn, events: PendingEvents, new: NewMemory, vector: Vector
    ) -> SaveResult:
        """Save `new` alone: read the live holder of its key and its nearest memories, and
        write what `decide` answers."""
        principal = events.principal
        scope = new.scope or Scope.USER
        holder = None
        if new.key is not None:
            holder = await db_memories.get_live_by_key(conn, principal, scope, new.key)
        exclude = [holder.id] if holder is not None else []
        candidates = await self._candidates(conn, principal, scope, vector, exclude)
        decision = decide(new, holder, candidates, self._thresholds, datetime.now(UTC))
        if isinstance(decision, Absorb):
            return await self._absorb(conn, events, new, decision)
        if isinstance(decision, Create):
            if decision.expired is not None:
                await db_memories.invalidate(
                    conn, decision.expired, InvalidationReason.EXPIRED, at_expiry=True
                )
            created = await db_memories.insert_memory(
                conn, principal, new, scope=scope, embedding=vector, model=self._model
            )
            emit(events, EventType.CREATED, created, {"memory": codec.snapshot(created)})
            return SaveResult(SaveOutcome.CREATED, created, decision.near_duplicates)
        return await self._supersede(
            conn, events, decision.old, new, vector, decision.near_duplicates
        )

    async def _candidates(
        self,
        conn: Conn,
        principal: Principal,
        scope: Scope,
        vector: Vector,
        exclude: Sequence[uuid.UUID],
    ) -> list[NearDuplicate]:
        """The live memories of the owner nearest to `vector`, as `decide` compares a save with
        them (but those of `exclude`)."""
        return await db_memories.near_duplicates(
            conn,
            principal,
            scope,
            vector,
            self._model,
            threshold=self._thresholds.floor,
            limit=self._thresholds.searched,
            exclude=exclude,
        )

    async def _absorb(
        self, conn: Conn, events: PendingEvents, new: NewMemory, decision: Absorb[NearDuplicate]
    ) -> SaveResult:
        existing = decision.target.memory
        absorbed = await db_memories.absorb(
            conn, existing, decision.source_thread_ids, decision.pinned
        )
        emit(
            events,
            EventType.ABSORBED,
            existing,
            {
                # the absorbed text is kept so nothing said is lost
                "absorbedContent": new.content,
                "absorbedSourceThreadIds": list(new.source_thread_ids),
                "absorbedSource": new.source,
                "similarity": decision.target.similarity,
            },
        )
        return SaveResult(SaveOutcome.ABSORBED, absorbed, decision.near_duplicates)

    async def replace(
        self, conn: Conn, events: PendingEvents, old: Memory, new: NewMemory, vector: Vector
    ) -> SaveResult:
        """Retire `old` as superseded and insert `new` as its next version, in this transaction."""
        candidates = await self._candidates(conn, events.principal, old.scope, vector, [old.id])
        reported = near_duplicates(new, candidates, self._thresholds)
        return await self._supersede(conn, events, old, new, vector, reported)

    async def _supersede(
        self,
        conn: Conn,
        events: PendingEvents,
        old: Memory,
        new: NewMemory,
        vector: Vector,
        reported: tuple[NearDuplicate, ...],
    ) -> SaveResult:
        new_id = uuid.uuid4()
        retired = await db_memories.invalidate(
            conn, old, InvalidationReason.SUPERSEDED, superseded_by=new_id
        )
        created = await db_memories.insert_memory(
            conn,
            events.principal,
            new,
            scope=old.scope,
            embedding=vector,
            model=self._model,
            memory_id=new_id,
            supersedes=old.id,
        )
        emit(
            events,
            EventType.SUPERSEDED,
            created,
            {"memory": codec.snapshot(created), "supersededId": str(old.id)},
        )
        return SaveResult(SaveOutcome.SUPERSEDED, created, reported, superseded=retired)


def _similarities(vectors: Sequence[Vector]) -> list[list[float]]:
    """The cosine similarity of every pair of `vectors`."""
    unit = np.asarray(vectors, dtype=np.float64)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    similarity: list[list[float]] = (unit @ unit.T).tolist()
    return similarity
