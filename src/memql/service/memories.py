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
from typing import TYPE_CHECKING

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
    Memory,
    MemoryEvent,
    Page,
    Principal,
    RecallHit,
    SaveResult,
    Scope,
    Signals,
    Weights,
)
from memql.requests import (
    ContextQuery,
    Criteria,
    MemoryDraft,
    MemoryFilter,
    MemoryRef,
    NewMemory,
    PageRequest,
    RecallQuery,
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
    async def save(self, principal: Principal, draft: MemoryDraft) -> SaveResult:
        """Save one memory: CREATED, ABSORBED into a same-kind near-duplicate, or SUPERSEDED
        (its key was live)."""
        [result] = await self.save_many(principal, [draft])
        return result

    @validation.storable_arguments
    async def save_many(
        self, principal: Principal, drafts: Sequence[MemoryDraft]
    ) -> list[SaveResult]:
        """Save several memories atomically, each with its own outcome, in order.

        Every input is validated before anything is written; one bad input fails the batch.
        """
        if not drafts:
            return []
        if len(drafts) > self._limits.batch_save:
            raise BadInput(f"a batch holds at most {self._limits.batch_save} memories")
        news: list[NewMemory] = []
        for index, draft in enumerate(drafts):
            try:
                news.append(validation.new_memory(draft, self._limits))
            except BadInput as exc:
                if len(drafts) > 1:
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
        self, principal: Principal, draft: MemoryDraft, ref: MemoryRef
    ) -> SaveResult:
        """Replace the live memory `ref` names (by id, or by key within its scope) with a full
        new version.

        The new version keeps the old one's key when the draft names none.
        """
        checks.require_some_write(principal)
        new = validation.new_memory(draft, self._limits)
        [vector] = await self._embedder.embed([new.content])
        async with self._writing(principal, db_memories.NEAR_DUPLICATE_SETTINGS) as (conn, events):
            old = await self._locate_locked(conn, principal, ref)
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
    async def retire(self, principal: Principal, ref: MemoryRef) -> Memory:
        """Retire the live memory `ref` names: it is no longer recalled or listed, and can be
        restored."""
        async with self._writing(principal) as (conn, events):
            memory = await self._locate_locked(conn, principal, ref)
            self._require_live(memory, "retire")
            retired = await db_memories.invalidate(conn, memory, InvalidationReason.RETIRED)
            saving.emit(events, EventType.RETIRED, memory)
            return retired

    @validation.storable_arguments
    async def restore(self, principal: Principal, memory_id: uuid.UUID) -> Memory:
        """Bring a retired memory back (not a superseded one: restore its newest version's chain
        by superseding instead)."""
        async with self._writing(principal) as (conn, events):
            memory = await self._locate_locked(conn, principal, MemoryRef(memory_id))
            if memory.invalidation_reason is not InvalidationReason.RETIRED:
                state = memory.invalidation_reason or "live"
                raise Conflict(f"only a retired memory can be restored; this one is {state}")
            if memory.key is not None and await db_memories.get_live_by_key(
                conn, principal, memory.scope, memory.key
            ):
                raise Conflict(f"another live memory holds the key {memory.key!r}")
            restored = await db_memories.reinstate(conn, memory)
            saving.emit(events, EventType.RESTORED, memory)
            return restored

    @validation.storable_arguments
    async def erase(self, principal: Principal, memory_id: uuid.UUID) -> EraseResult:
        """Hard-delete a memory with all its versions and the events carrying their content."""
        checks.require_erasure(principal)
        async with self._writing(principal) as (conn, events):
            memory = await self._locate_locked(conn, principal, MemoryRef(memory_id))
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
            events = db_events.PendingEvents(principal, self._sessions.distributed)
            yield conn, events
            await events.write(conn)

    @staticmethod
    def _require_live(memory: Memory, action: str) -> None:
        invalidated_at, reason = memory.effective_invalidation(datetime.now(UTC))
        if invalidated_at is not None:
            raise Conflict(f"cannot {action} a memory that is {reason}")

    async def _locate_locked(self, conn: Conn, principal: Principal, ref: MemoryRef) -> Memory:
        """The memory `ref` names by id or by key, with its owner locked and write access
        checked."""
        if (ref.id is None) == (ref.key is None):
            raise BadInput("name the memory by `id` or by `key`, not both")
        checks.require_some_write(principal)
        readable = principal.grant.readable_scopes()
        if ref.id is not None:
            found = await db_memories.get(conn, principal, ref.id, readable)
        else:
            key_scope = ref.scope or Scope.USER
            found = (
                await db_memories.get_live_by_key(
                    conn, principal, key_scope, validation.key(ref.key, self._limits) or ""
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

    def _criteria(self, principal: Principal, flt: MemoryFilter) -> Criteria:
        return validation.criteria(flt, checks.readable(principal, flt.scope), self._limits)

    @validation.storable_arguments
    async def list_memories(
        self,
        principal: Principal,
        flt: MemoryFilter = MemoryFilter(),
        page: PageRequest = PageRequest(),
        *,
        rows: bool = True,
    ) -> Page:
        """A page of the memories the filter admits, newest created first unless the page's
        order says otherwise (see `PageRequest`).

        `rows=False` checks the same request but reads no page: the result carries only the
        criteria, for a caller that wants the count alone (`count_memories`)."""
        window = pagination.window(page, self._limits)
        criteria = self._criteria(principal, flt)
        if not rows:
            return Page([], [], has_next_page=False, criteria=criteria)
        memories, more, behind = await self._reads.run(
            principal, lambda conn: db_memories.list_page(conn, principal, criteria, window)
        )
        cursors = [pagination.encode(m, window.order) for m in memories]
        has_next, has_previous = (behind, more) if window.from_end else (more, behind)
        return Page(
            memories,
            cursors,
            has_next_page=has_next,
            end_cursor=cursors[-1] if cursors else None,
            has_previous_page=has_previous,
            start_cursor=cursors[0] if cursors else None,
            criteria=criteria,
        )

    async def count_memories(self, principal: Principal, criteria: Criteria) -> int:
        """How many memories a list's criteria admit over all its pages (`Page.criteria`)."""
        for scope in criteria.scopes:
            checks.readable(principal, scope)
        return await self._reads.run(
            principal, lambda conn: db_memories.count_matching(conn, principal, criteria)
        )

    @validation.storable_arguments
    async def recall(self, principal: Principal, q: RecallQuery) -> list[RecallHit]:
        """The most relevant live memories for `q.text` that its filter admits, best first;
        score in [0, 1]. With `min_score`, only hits scoring at least that: a query about
        nothing stored then returns nothing rather than the least unrelated memories."""
        validation.live_only(q)
        limit = validation.number(q, "limit", self._limits)
        floor = validation.number(q, "min_score", self._limits, absent=0.0)
        text = validation.content(q.text, self._limits, field="text")
        criteria = self._criteria(principal, q.filter)
        hits = await self._recall(principal, text, limit, criteria)
        # hits come best first, so dropping the low ones after the limit loses no better one
        return [h for h in hits if h.score >= floor]

    async def _recall(
        self, principal: Principal, text: str, limit: int, criteria: Criteria
    ) -> list[RecallHit]:
        # shielded: the embedding may be shared with other requests for the same text, which
        # this one's cancellation (a client gone) must not cancel
        vector = await asyncio.shield(self.query_vectors.vector(principal.project_id, text))
        ranked = await self._reads.run(
            principal,
            lambda conn: db_recall.recall(
                conn,
                principal,
                query=text,
                embedding=vector,
                model=self.model,
                criteria=criteria,
                weights=self._weights,
                limit=limit,
                routed=self._sessions.distributed,
            ),
            db_recall.RECALL_SETTINGS,
        )
        # sent with the binding as the block ended, in one round trip
        hits = await ranked.hits()
        return [RecallHit(memory, score, Signals(**signals)) for memory, score, signals in hits]

    @validation.storable_arguments
    async def context(self, principal: Principal, q: ContextQuery = ContextQuery()) -> ContextBlock:
        """The block a trusted loop puts in its system prompt: of the memories the filter
        admits, pinned first, then the most relevant to `q.text` (or the newest without it),
        within `budget` characters."""
        validation.live_only(q)
        budget = validation.number(q, "budget", self._limits)
        criteria = self._criteria(principal, q.filter)
        if q.text is not None and q.text.strip():
            text = validation.content(q.text, self._limits, field="text")
            # the count needs no vector: it is read while the model embeds the query
            counting = asyncio.ensure_future(self._count(principal, criteria))
            try:
                hits = await self._recall(
                    principal, text, self._limits.context_candidates, criteria
                )
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
                conn, principal, criteria, self._limits.context_candidates
            ),
        )
        return format_context(newest, budget, total)

    async def _count(self, principal: Principal, criteria: Criteria) -> int:
        return await self._reads.run(
            principal, lambda conn: db_memories.count_matching(conn, principal, criteria)
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
