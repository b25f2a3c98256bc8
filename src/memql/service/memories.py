"""MemoryService: the one API that GraphQL and MCP call. Validation and grants are checked
here; every call runs in a principal-bound transaction (`db/session.py`); saves run the
algorithm of `saving.py`."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from psycopg_pool import AsyncConnectionPool

from memql import metrics
from memql.access import checks
from memql.db import events as db_events
from memql.db import memories as db_memories
from memql.db import recall as db_recall
from memql.db.pool import Conn
from memql.db.replica import Reads, Standby
from memql.db.session import Sessions
from memql.embeddings import Embedder
from memql.errors import (
    BadInput,
    Conflict,
    NotFound,
)
from memql.model import (
    ContextBlock,
    EraseResult,
    EventType,
    InvalidationReason,
    Kind,
    Memory,
    MemoryEvent,
    MemoryFilter,
    NewMemory,
    Order,
    Page,
    Principal,
    RecallHit,
    SaveResult,
    Scope,
    Signals,
    TimeRange,
    Weights,
)
from memql.rules import pagination, validation
from memql.rules.context_block import format_context
from memql.service import saving
from memql.service.query_vectors import QueryVectors
from memql.service.saving import Saving
from memql.service.webhooks import Webhooks
from memql.settings import Limits, Settings

if TYPE_CHECKING:
    from memql.realtime import Realtime
    from memql.realtime.recheck import Recheck

# Meaning dominates; words the model may not know (names, codes, versions) come through the
# lexical side; pinning and recency only nudge. Tuned on the dev half of the recall evaluation set
# (bench/recall, docs/recall.md): the plateau of best MRR; recency gentle enough (2%, halving
# every 90 days) that questions not about time lose nothing.
DEFAULT_WEIGHTS = Weights(
    vector=0.76, lexical=0.20, recency=0.02, pinned=0.02, recency_half_life_days=90.0
)

log = logging.getLogger(__name__)


class MemoryService:
    def __init__(
        self,
        pool: AsyncConnectionPool,
        embedder: Embedder,
        settings: Settings,
        weights: Weights | None = None,
        realtime: Realtime | None = None,
        standby: Standby | None = None,
    ) -> None:
        self._sessions = Sessions(pool, project_slots=settings.project_slots)
        # recall, lists, context blocks and counts: on a standby when one is configured
        self._reads = Reads(self._sessions, standby, project_slots=settings.project_slots)
        self._realtime = realtime
        self._embedder = embedder
        self._settings = settings
        self._limits = settings.limits
        self._weights = weights or settings.recall_weights or DEFAULT_WEIGHTS
        self._saving = Saving(settings, embedder.model)
        self.query_vectors = QueryVectors(embedder, settings.query_vectors)
        self.webhooks = Webhooks(self._sessions, allow_private=settings.webhooks_allow_private)

    @property
    def sessions(self) -> Sessions:
        """The service's transactions (their projects' shares of the pool: `/metrics`)."""
        return self._sessions

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def model(self) -> str:
        return self._embedder.model

    # --- writes ---------------------------------------------------------------------------

    @validation.storable_arguments
    async def save(self, principal: Principal, raw: NewMemory) -> SaveResult:
        """Save one memory: CREATED, ABSORBED into a same-kind near-duplicate, or SUPERSEDED
        (its key was live)."""
        [result] = await self.save_many(principal, [raw])
        return result

    @validation.storable_arguments
    async def save_many(self, principal: Principal, raws: Sequence[NewMemory]) -> list[SaveResult]:
        """Save several memories atomically, each with its own outcome, in order.

        Every input is validated before anything is written; one bad input fails the batch.
        """
        if not raws:
            return []
        if len(raws) > self._limits.batch_save:
            raise BadInput(f"a batch holds at most {self._limits.batch_save} memories")
        news: list[NewMemory] = []
        for index, raw in enumerate(raws):
            try:
                news.append(validation.new_memory(raw, self._limits))
            except BadInput as exc:
                if len(raws) > 1:
                    exc.extensions["index"] = index
                    exc.message = f"input {index}: {exc.message}"
                    exc.args = (exc.message,)
                raise
        for new in news:
            checks.require_write(principal, new.scope or Scope.USER)
        vectors = await self._embedder.embed([n.content for n in news])
        async with self._writing(principal, db_memories.NEAR_DUPLICATE_SETTINGS) as (conn, events):
            # lock owners in one order so concurrent batches cannot deadlock
            for scope in sorted({n.scope or Scope.USER for n in news}, key=lambda s: s.value):
                await db_memories.lock_owner(
                    conn, principal.project_id, scope, principal.owner_for(scope)
                )
            results = await self._saving.save_all_locked(conn, events, news, vectors)
        for result in results:
            metrics.SAVES.labels(result.outcome.value).inc()
        return results

    @validation.storable_arguments
    async def supersede(
        self,
        principal: Principal,
        raw: NewMemory,
        *,
        memory_id: uuid.UUID | None = None,
        key: str | None = None,
        scope: Scope | None = None,
    ) -> SaveResult:
        """Replace a live memory (by id, or by key within `scope`) with a full new version.

        The new version keeps the old one's key when the input names none.
        """
        checks.require_some_write(principal)
        new = validation.new_memory(raw, self._limits)
        [vector] = await self._embedder.embed([new.content])
        async with self._writing(principal, db_memories.NEAR_DUPLICATE_SETTINGS) as (conn, events):
            old = await self._locate_locked(conn, principal, memory_id, key, scope)
            self._require_live(old, "supersede")
            if new.key is None:
                new = replace(new, key=old.key)
            elif new.key != old.key:
                holder = await db_memories.get_live_by_key(conn, principal, old.scope, new.key)
                if holder is not None:
                    raise Conflict(f"another live memory holds the key {new.key!r}")
            if new.scope is not None and new.scope is not old.scope:
                raise BadInput(
                    "a new version keeps the scope of the memory it supersedes", field="scope"
                )
            new = replace(new, scope=old.scope)
            return await self._saving.replace(conn, events, old, new, vector)

    @validation.storable_arguments
    async def retire(
        self,
        principal: Principal,
        *,
        memory_id: uuid.UUID | None = None,
        key: str | None = None,
        scope: Scope | None = None,
    ) -> Memory:
        async with self._writing(principal) as (conn, events):
            memory = await self._locate_locked(conn, principal, memory_id, key, scope)
            self._require_live(memory, "retire")
            retired = await db_memories.invalidate(conn, memory.id, InvalidationReason.RETIRED)
            saving.emit(events, EventType.RETIRED, memory)
            return retired

    @validation.storable_arguments
    async def restore(self, principal: Principal, memory_id: uuid.UUID) -> Memory:
        """Bring a retired memory back (not a superseded one: restore its newest version's chain
        by superseding instead)."""
        async with self._writing(principal) as (conn, events):
            memory = await self._locate_locked(conn, principal, memory_id, None, None)
            if memory.invalidation_reason is not InvalidationReason.RETIRED:
                state = memory.invalidation_reason or "live"
                raise Conflict(f"only a retired memory can be restored; this one is {state}")
            if memory.key is not None and await db_memories.get_live_by_key(
                conn, principal, memory.scope, memory.key
            ):
                raise Conflict(f"another live memory holds the key {memory.key!r}")
            restored = await db_memories.reinstate(conn, memory.id)
            saving.emit(events, EventType.RESTORED, memory)
            return restored

    @validation.storable_arguments
    async def erase(self, principal: Principal, memory_id: uuid.UUID) -> EraseResult:
        """Hard-delete a memory with all its versions and the events carrying their content."""
        checks.require_erasure(principal)
        async with self._writing(principal) as (conn, events):
            memory = await self._locate_locked(conn, principal, memory_id, None, None)
            ids = await db_memories.erase_chain(conn, principal, memory)
            saving.emit(events, EventType.ERASED, memory, {"versions": len(ids)})
            return EraseResult(erased=len(ids))

    async def erase_user(self, principal: Principal) -> EraseResult:
        """Hard-delete everything of the principal's user in this project (right to erasure)."""
        checks.require_erasure(principal)
        checks.require_write(principal, Scope.USER)
        async with self._writing(principal) as (conn, events):
            await db_memories.lock_owner(conn, principal.project_id, Scope.USER, principal.user_id)
            count = await db_memories.erase_owner(conn, principal, Scope.USER)
            events.add(EventType.ERASED, Scope.USER, None, {"versions": count})
            return EraseResult(erased=count)

    @asynccontextmanager
    async def _writing(
        self, principal: Principal, settings: Sequence[tuple[str, str]] = ()
    ) -> AsyncIterator[tuple[Conn, db_events.PendingEvents]]:
        """A write transaction for `principal` and the events it records: they are written
        when the block has done everything else, as the transaction's last statement (their
        cursors lock the project's counter until the commit). A block that raises writes none.
        With reads on standbys, the commit's position is then kept as the principal's last
        write, so their next read sees it."""
        committed = partial(self._reads.wrote, principal) if self._reads.on_standby else None
        async with self._sessions.bound(principal, settings, committed=committed) as conn:
            events = db_events.PendingEvents(principal)
            yield conn, events
            await events.write(conn)

    @staticmethod
    def _require_live(memory: Memory, action: str) -> None:
        invalidated_at, reason = memory.effective_invalidation(datetime.now(UTC))
        if invalidated_at is not None:
            raise Conflict(f"cannot {action} a memory that is {reason}")

    async def _locate_locked(
        self,
        conn: Conn,
        principal: Principal,
        memory_id: uuid.UUID | None,
        key: str | None,
        scope: Scope | None,
    ) -> Memory:
        """The memory named by id or by key, with its owner locked and write access checked."""
        if (memory_id is None) == (key is None):
            raise BadInput("name the memory by `id` or by `key`, not both")
        checks.require_some_write(principal)
        readable = principal.grant.readable_scopes()
        if memory_id is not None:
            found = await db_memories.get(conn, principal, memory_id, readable)
        else:
            key_scope = scope or Scope.USER
            found = (
                await db_memories.get_live_by_key(
                    conn, principal, key_scope, validation.key(key, self._limits) or ""
                )
                if key_scope in readable
                else None
            )
        if found is None:
            raise NotFound("no such memory")
        checks.require_write(principal, found.scope)
        await db_memories.lock_owner(conn, principal.project_id, found.scope, found.owner_id)
        # read again under the lock: a concurrent write may have changed it
        fresh = await db_memories.get(conn, principal, found.id, [found.scope])
        if fresh is None:
            raise NotFound("no such memory")
        return fresh

    # --- reads ----------------------------------------------------------------------------

    @validation.storable_arguments
    async def get(self, principal: Principal, memory_id: uuid.UUID) -> Memory | None:
        scopes = checks.readable(principal, None)
        async with self._sessions.read(principal) as conn:
            return await db_memories.get(conn, principal, memory_id, scopes)

    @validation.storable_arguments
    async def history(self, principal: Principal, memory_id: uuid.UUID) -> list[Memory]:
        scopes = checks.readable(principal, None)
        async with self._sessions.read(principal) as conn:
            versions = await db_memories.history(conn, principal, memory_id, scopes)
        if not versions:
            raise NotFound("no such memory")
        return versions

    @validation.storable_arguments
    async def list_memories(
        self,
        principal: Principal,
        *,
        scope: Scope | None = None,
        kind: Kind | None = None,
        category: str | None = None,
        pinned: bool | None = None,
        contains: str | None = None,
        include_invalidated: bool = False,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        occurred_after: datetime | None = None,
        occurred_before: datetime | None = None,
        source: dict[str, Any] | None = None,
        order: Order | None = None,
        first: int | None = None,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
        rows: bool = True,
    ) -> Page:
        """A page of the memories the filters admit, newest created first unless `order` says
        otherwise: the `first` after the cursor `after`, or the `last` before `before` (at most
        one of `first` and `last`; neither means the first page of the default size).

        `rows=False` validates the same arguments but reads no page: the result carries only
        the filter, for a caller that wants the count alone (`count_memories`)."""
        order = order or Order()
        if first is not None and last is not None:
            raise BadInput("pass `first` or `last`, not both", argument="last")
        limits = self._limits
        if last is not None:
            size = validation.bounded(last, limits.list_default, limits.list_max, field="last")
        else:
            size = validation.bounded(first, limits.list_default, limits.list_max, field="first")
        start = pagination.decode(after, order, argument="after") if after is not None else None
        end = pagination.decode(before, order, argument="before") if before is not None else None
        flt = MemoryFilter(
            scopes=checks.readable(principal, scope),
            kind=kind,
            category=category,
            pinned=pinned,
            contains=contains or None,
            include_invalidated=include_invalidated,
            created=validation.time_range(created_after, created_before, field="created"),
            updated=validation.time_range(updated_after, updated_before, field="updated"),
            occurred=validation.time_range(occurred_after, occurred_before, field="occurred"),
            source=validation.source(source, self._limits),
        )
        if not rows:
            return Page([], [], has_next_page=False, filter=flt)
        memories, more, behind = await self._reads.run(
            principal,
            lambda conn: db_memories.list_page(
                conn,
                principal,
                flt,
                order,
                limit=size,
                after=start,
                before=end,
                from_end=last is not None,
            ),
        )
        cursors = [pagination.encode(m, order) for m in memories]
        has_next, has_previous = (behind, more) if last is not None else (more, behind)
        return Page(
            memories,
            cursors,
            has_next_page=has_next,
            end_cursor=cursors[-1] if cursors else None,
            has_previous_page=has_previous,
            start_cursor=cursors[0] if cursors else None,
            filter=flt,
        )

    async def count_memories(self, principal: Principal, flt: MemoryFilter) -> int:
        """How many memories a list's filter admits over all its pages (`Page.filter`)."""
        for scope in flt.scopes:
            checks.readable(principal, scope)
        return await self._reads.run(
            principal, lambda conn: db_memories.count_matching(conn, principal, flt)
        )

    @validation.storable_arguments
    async def recall(
        self,
        principal: Principal,
        query: str,
        *,
        limit: int | None = None,
        scope: Scope | None = None,
        kinds: Sequence[Kind] | None = None,
        categories: Sequence[str] | None = None,
        occurred_after: datetime | None = None,
        occurred_before: datetime | None = None,
        min_score: float | None = None,
    ) -> list[RecallHit]:
        """The most relevant live memories for `query`, best first; score in [0, 1]. With
        `min_score`, only hits scoring at least that: a query about nothing stored then
        returns nothing rather than the least unrelated memories."""
        limit = validation.bounded(
            limit, self._limits.recall_default, self._limits.recall_max, field="limit"
        )
        occurred = validation.time_range(occurred_after, occurred_before, field="occurred")
        floor = validation.score(min_score, field="min_score")
        hits = await self._recall(
            principal,
            validation.content(query, self._limits, field="query"),
            limit,
            checks.readable(principal, scope),
            kinds,
            categories,
            occurred,
        )
        # hits come best first, so dropping the low ones after the limit loses no better one
        return [h for h in hits if h.score >= floor]

    async def _recall(
        self,
        principal: Principal,
        query: str,
        limit: int,
        scopes: tuple[Scope, ...],
        kinds: Sequence[Kind] | None = None,
        categories: Sequence[str] | None = None,
        occurred: TimeRange = TimeRange(),
    ) -> list[RecallHit]:
        # shielded: the embedding may be shared with other requests for the same text, which
        # this one's cancellation (a client gone) must not cancel
        vector = await asyncio.shield(self.query_vectors.vector(principal.project_id, query))
        ranked = await self._reads.run(
            principal,
            lambda conn: db_recall.recall(
                conn,
                principal,
                query=query,
                embedding=vector,
                model=self.model,
                scopes=scopes,
                kinds=kinds,
                categories=categories,
                weights=self._weights,
                limit=limit,
                occurred=occurred,
            ),
            db_recall.RECALL_SETTINGS,
        )
        # sent with the binding as the block ended, in one round trip
        hits = await ranked.hits()
        return [RecallHit(memory, score, Signals(**signals)) for memory, score, signals in hits]

    @validation.storable_arguments
    async def context(
        self, principal: Principal, *, query: str | None = None, budget: int | None = None
    ) -> ContextBlock:
        """The block a trusted loop puts in its system prompt: pinned first, then the most
        relevant to `query` (or the newest without one), within `budget` characters."""
        budget = validation.bounded(
            budget, self._limits.context_budget, self._limits.context_budget_max, field="budget"
        )
        scopes = checks.readable(principal, None)
        if query is not None and query.strip():
            query = validation.content(query, self._limits, field="query")
            # the live count needs no vector: it is read while the model embeds the query
            counting = asyncio.ensure_future(self._count_live(principal, scopes))
            try:
                hits = await self._recall(principal, query, self._limits.context_candidates, scopes)
            except BaseException:
                # the recall failed or was cancelled: nothing waits for the count
                counting.cancel()
                await asyncio.gather(counting, return_exceptions=True)
                raise
            total = await counting
            memories = [h.memory for h in hits]
            memories.sort(key=lambda m: not m.pinned)  # stable: relevance order within each
            return format_context(memories, budget, total)
        newest, total = await self._reads.run(
            principal,
            lambda conn: db_memories.context_memories(
                conn, principal, scopes, self._limits.context_candidates
            ),
        )
        return format_context(newest, budget, total)

    async def _count_live(self, principal: Principal, scopes: tuple[Scope, ...]) -> int:
        return await self._reads.run(
            principal, lambda conn: db_memories.count_live(conn, principal, scopes)
        )

    # --- realtime -------------------------------------------------------------------------

    async def event_cursor(self, principal: Principal) -> str:
        """Where the event log stands now, as a `since` for `memory_events`: a stream started
        from it receives every change committed after this call, however long the stream
        takes to start. (Without `since` a stream starts wherever the log is once it is set
        up, so a change committed in between reaches it only through a later `since`.)"""
        return str(await self._running_realtime().position(self._sessions, principal))

    @validation.storable_arguments
    def memory_events(
        self,
        principal: Principal,
        *,
        scope: Scope | None = None,
        since: str | None = None,
        recheck: Recheck | None = None,
    ) -> AsyncGenerator[MemoryEvent, None]:
        """The principal's memory events in cursor order, each once: its user scope and the
        project scope, as far as the grant reads them (or only `scope`). With `since` (a cursor
        from an earlier event) the stream first replays what followed it, then goes live.

        `recheck` re-authenticates the subscriber: every stream of the instance is checked in
        one pass per interval, and ends when its credentials are refused or the grant no longer
        reads a subscribed scope.
        """
        scopes = checks.readable(principal, scope)
        after = validation.event_cursor(since)
        return self._running_realtime().events(self._sessions, principal, scopes, after, recheck)

    def _running_realtime(self) -> Realtime:
        if self._realtime is None:
            raise RuntimeError("realtime is not running")
        return self._realtime
