"""The save algorithm, run under the owner's lock in the caller's transaction: a live memory
with the same key is superseded; otherwise a same-kind near-duplicate that `dedup.may_absorb`
accepts absorbs the save; otherwise the memory is inserted. Each write records its event."""

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
    NewMemory,
    Principal,
    SaveOutcome,
    SaveResult,
    Scope,
)
from memql.rules import codec, dedup
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
        self._absorb_threshold = settings.absorb_threshold
        self._near_duplicate_threshold = settings.near_duplicate_threshold
        self._source_thread_ids = settings.limits.source_thread_ids
        self._reported = settings.limits.near_duplicates_reported

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
        planned = None
        if len(news) > 1 and all(n.key is None for n in news):
            planned = await self._plan_creations(conn, principal, news, vectors)
        if planned is None:
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
                    d if isinstance(d, NearDuplicate) else NearDuplicate(created[d[0]], d[1])
                    for d in near
                ),
            )
            for memory, near in zip(created, planned, strict=True)
        ]

    async def _plan_creations(
        self,
        conn: Conn,
        principal: Principal,
        news: Sequence[NewMemory],
        vectors: Sequence[Vector],
    ) -> list[list[NearDuplicate | tuple[int, float]]] | None:
        """Each input's near-duplicates as `save_locked` would find them after the inputs
        before it were created (a stored memory, or (index of an earlier input, similarity)),
        or None when some input would be absorbed."""
        bar = self._near_duplicate_threshold
        floor = min(bar, dedup.CONTRADICTION_FLOOR)
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
                threshold=floor,
                limit=2 * self._reported,
            )
            for i, of_i in zip(indexes, found, strict=True):
                stored[i] = of_i
        unit = np.asarray(vectors, dtype=np.float64)
        unit /= np.linalg.norm(unit, axis=1, keepdims=True)
        similarity = unit @ unit.T
        plans: list[list[NearDuplicate | tuple[int, float]]] = []
        for j, new in enumerate(news):
            # stored rows first among equals: they were created before this batch
            candidates: list[tuple[float, int, NearDuplicate | tuple[int, float]]] = [
                (d.similarity, 0, d) for d in stored[j]
            ]
            candidates += [
                (sim, 1, (i, sim))
                for i in np.flatnonzero(similarity[j, :j] >= floor).tolist()
                if scopes[i] is scopes[j] and (sim := min(1.0, float(similarity[j, i]))) >= floor
            ]
            candidates.sort(key=lambda c: (-c[0], c[1]))
            reported: list[NearDuplicate | tuple[int, float]] = []
            for sim, _, found_ in candidates[: 2 * self._reported]:
                earlier = news[found_[0]] if isinstance(found_, tuple) else found_.memory
                if sim >= bar or dedup.contradicts(earlier.content, new.content, sim):
                    if (
                        earlier.kind is new.kind
                        and earlier.occurred_at == new.occurred_at
                        and dedup.may_absorb(
                            earlier.content, new.content, sim, self._absorb_threshold
                        )
                    ):
                        return None
                    reported.append(found_)
            plans.append(reported[: self._reported])
        return plans

    async def save_locked(
        self, conn: Conn, events: PendingEvents, new: NewMemory, vector: Vector
    ) -> SaveResult:
        principal = events.principal
        scope = new.scope or Scope.USER
        if new.key is not None:
            current = await db_memories.get_live_by_key(conn, principal, scope, new.key)
            if current is not None:
                if current.expires_at is not None and current.expires_at <= datetime.now(UTC):
                    await db_memories.invalidate(
                        conn, current.id, InvalidationReason.EXPIRED, at_expiry=True
                    )
                else:
                    return await self.replace(conn, events, current, new, vector)
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
                    events,
                    target.memory,
                    new,
                    target.similarity,
                    tuple(d for d in near if d is not target),
                )
        created = await db_memories.insert_memory(
            conn, principal, new, scope=scope, embedding=vector, model=self._model
        )
        emit(events, EventType.CREATED, created, {"memory": codec.snapshot(created)})
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
            limit=2 * self._reported,
            exclude=exclude,
        )
        return [
            d
            for d in candidates
            if d.similarity >= bar or dedup.contradicts(d.memory.content, content, d.similarity)
        ][: self._reported]

    async def _absorb(
        self,
        conn: Conn,
        events: PendingEvents,
        existing: Memory,
        new: NewMemory,
        similarity: float,
        others: tuple[NearDuplicate, ...],
    ) -> SaveResult:
        merged = tuple(dict.fromkeys(existing.source_thread_ids + new.source_thread_ids))
        # over the cap, the newest provenance wins
        merged = merged[-self._source_thread_ids :]
        absorbed = await db_memories.absorb(conn, existing.id, merged, new.pinned)
        emit(
            events,
            EventType.ABSORBED,
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
        self, conn: Conn, events: PendingEvents, old: Memory, new: NewMemory, vector: Vector
    ) -> SaveResult:
        """Retire `old` as superseded and insert `new` as its next version, in this transaction."""
        principal = events.principal
        new_id = uuid.uuid4()
        retired = await db_memories.invalidate(
            conn, old.id, InvalidationReason.SUPERSEDED, superseded_by=new_id
        )
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
        emit(
            events,
            EventType.SUPERSEDED,
            created,
            {"memory": codec.snapshot(created), "supersededId": str(old.id)},
        )
        near = await self.near_duplicates(
            conn, principal, old.scope, vector, new.content, exclude=[created.id]
        )
        return SaveResult(SaveOutcome.SUPERSEDED, created, tuple(near), superseded=retired)
