"""Strawberry types, built from domain objects."""

from __future__ import annotations

import dataclasses
import typing
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, TypeVar

import strawberry
from strawberry.scalars import JSON

from memql import model, requests
from memql.settings import LIMITS
from memql.words import API_KEY, Api

if TYPE_CHECKING:
    from memql.graphql.context import Context

# The domain enums, registered with GraphQL names; annotations use the domain classes themselves.
strawberry.enum(model.Kind, name="MemoryKind", description="What a memory is.")
strawberry.enum(
    model.Scope, name="MemoryScope", description="USER: private to one app user; PROJECT: shared."
)
strawberry.enum(model.SaveOutcome, name="SaveOutcome")
strawberry.enum(model.Access, name="AccessLevel")
strawberry.enum(model.Consumer, name="Consumer")
MemoryKind: TypeAlias = model.Kind
MemoryScope: TypeAlias = model.Scope
SaveOutcome: TypeAlias = model.SaveOutcome
AccessLevel: TypeAlias = model.Access
Consumer: TypeAlias = model.Consumer


strawberry.enum(
    model.OrderField, name="MemoryOrderField", description="What a list of memories is sorted by."
)
strawberry.enum(model.SortDirection, name="OrderDirection")
MemoryOrderField: TypeAlias = model.OrderField
OrderDirection: TypeAlias = model.SortDirection


C = TypeVar("C", bound=type)


def item_type(held: Any) -> Any:
    """The GraphQL form of one value of a domain field (the domain enums are registered
    above)."""
    if held is model.Order:
        return MemoryOrder
    if held is uuid.UUID:
        return strawberry.ID
    if held == dict[str, Any]:
        return JSON
    return held


def shown_fields_of(record: type) -> Callable[[C], C]:
    """A class decorator (under `strawberry.type`) giving the object type a field for each
    field of `record` a transport shows (`Api.shown`), with its words; enums of text, such as
    `InvalidationReason`, as their text."""

    def add(cls: C) -> C:
        hints = typing.get_type_hints(record)
        annotations: dict[str, Any] = {}
        for f in dataclasses.fields(record):
            meta: Api = f.metadata[API_KEY]
            if not meta.shown:
                continue
            held, optional = model.unwrap_optional(hints[f.name])
            held = model.shown_as(held)
            shown = (
                list[item_type(typing.get_args(held)[0])]  # type: ignore[misc]
                if typing.get_origin(held) is tuple
                else item_type(held)
            )
            annotations[f.name] = shown | None if optional else shown
            words = requests.describe(meta, LIMITS, lambda v: str(v.name))
            setattr(cls, f.name, strawberry.field(description=words))
        cls.__annotations__ = annotations
        return cls

    return add


@strawberry.interface(description="An object that `node(id:)` fetches again by its id.")
class Node:
    id: strawberry.ID


@strawberry.type(description="A short, durable statement about a person or a project.")
@shown_fields_of(model.Memory)
class Memory(Node):
    """The fields a memory shows, with their words (`model.Memory`)."""

    @classmethod
    def from_domain(cls, m: model.Memory) -> Memory:
        """Every field of this type is the domain field of the same name (ids as `ID`,
        tuples as lists); an expired memory reads as invalidated."""
        invalidated_at, reason = m.effective_invalidation(datetime.now(UTC))
        values = {name: _graphql_value(getattr(m, name)) for name in _MEMORY_FIELDS}
        return cls(
            **{
                **values,
                "invalidated_at": invalidated_at,
                "invalidation_reason": str(reason) if reason is not None else None,
            }
        )


_MEMORY_FIELDS = tuple(f.name for f in dataclasses.fields(Memory))


def _graphql_value(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return strawberry.ID(str(value))
    if isinstance(value, tuple):
        return list(value)
    return value


@strawberry.type
class MemoryEdge:
    cursor: str
    node: Memory


@strawberry.type
class PageInfo:
    has_next_page: bool = strawberry.field(
        description="More memories follow the page (in the list's order)."
    )
    has_previous_page: bool = strawberry.field(description="More memories precede the page.")
    start_cursor: str | None = strawberry.field(
        description="The first edge's cursor: pass it as `before` with `last` for the page before."
    )
    end_cursor: str | None = strawberry.field(
        description="The last edge's cursor: pass it as `after` with `first` for the page after."
    )


@strawberry.input(description="How to sort a list of memories; the id breaks ties.")
class MemoryOrder:
    field: MemoryOrderField = MemoryOrderField.CREATED_AT
    direction: OrderDirection = OrderDirection.DESC

    def to_domain(self) -> model.Order:
        return model.Order(self.field, self.direction)


@strawberry.type(
    description="A page of memories in the list's order (newest created first by default):"
    " pass `pageInfo.endCursor` as `after` for the next page, `pageInfo.startCursor` as"
    " `before` with `last` for the previous one."
)
class MemoryConnection:
    edges: list[MemoryEdge]
    page_info: PageInfo
    _page: strawberry.Private[model.Page]

    @strawberry.field(
        description="How many memories the filters admit over all pages (counted on request)."
    )
    async def total_count(self, info: strawberry.Info) -> int:
        assert self._page.criteria is not None
        context: Context = info.context
        return await context.service.count_memories(context.principal, self._page.criteria)

    @classmethod
    def from_domain(cls, page: model.Page) -> MemoryConnection:
        return cls(
            edges=[
                MemoryEdge(cursor=c, node=Memory.from_domain(m))
                for m, c in zip(page.memories, page.cursors, strict=True)
            ],
            page_info=PageInfo(
                has_next_page=page.has_next_page,
                has_previous_page=page.has_previous_page,
                start_cursor=page.start_cursor,
                end_cursor=page.end_cursor,
            ),
            _page=page,
        )


@strawberry.type(description="The parts of a recall score, each in [0, 1].")
class RecallSignals:
    vector: float = strawberry.field(description="Cosine similarity of meaning.")
    lexical: float = strawberry.field(
        description="Full-text rank of the query's words, relative to the best match."
    )
    recency: float = strawberry.field(
        description="1 when just updated, halving every 90 days (by default)."
    )
    pinned: float = strawberry.field(description="1 when pinned.")
    redundancy: float = strawberry.field(
        description="Cosine similarity to the nearest in meaning of the hits ranked above this"
        " one (0 for the first); past 0.6 it lowers the score, so rewordings of one memory give"
        " way to other memories."
    )


@strawberry.type
class RecallHit:
    memory: Memory
    score: float = strawberry.field(description="Higher = more relevant; in [0, 1].")
    signals: RecallSignals

    @classmethod
    def from_domain(cls, hit: model.RecallHit) -> RecallHit:
        s = hit.signals
        return cls(
            memory=Memory.from_domain(hit.memory),
            score=hit.score,
            signals=RecallSignals(
                vector=s.vector,
                lexical=s.lexical,
                recency=s.recency,
                pinned=s.pinned,
                redundancy=s.redundancy,
            ),
        )


@strawberry.type
class NearDuplicate:
    memory: Memory
    similarity: float = strawberry.field(description="Cosine similarity to the saved content.")


@strawberry.type
class SaveMemoryPayload:
    outcome: SaveOutcome
    memory: Memory = strawberry.field(
        description="The new memory, the one that absorbed the save, or the new version."
    )
    near_duplicates: list[NearDuplicate] = strawberry.field(
        description="Similar live memories that did not absorb this save (another kind, or"
        " below the absorb threshold): supersede one of them if it is the same fact."
    )
    superseded: Memory | None = strawberry.field(
        description="The version this save retired (outcome SUPERSEDED)."
    )

    @classmethod
    def from_domain(cls, r: model.SaveResult) -> SaveMemoryPayload:
        return cls(
            outcome=r.outcome,
            memory=Memory.from_domain(r.memory),
            near_duplicates=[
                NearDuplicate(memory=Memory.from_domain(d.memory), similarity=d.similarity)
                for d in r.near_duplicates
            ],
            superseded=Memory.from_domain(r.superseded) if r.superseded else None,
        )


@strawberry.type
class SupersedeMemoryPayload:
    memory: Memory = strawberry.field(description="The new version.")
    superseded: Memory = strawberry.field(description="The retired version.")
    near_duplicates: list[NearDuplicate]


@strawberry.type
class EraseResult:
    erased: int = strawberry.field(description="How many memory versions were deleted.")


@strawberry.type(description="A markdown block of memories for a system prompt.")
class MemoryContext:
    text: str
    count: int = strawberry.field(description="Memories in the block.")
    omitted: int = strawberry.field(
        description="Live memories the filter admits, left out to fit the budget."
    )


@strawberry.type
class Grant:
    user: AccessLevel
    project: AccessLevel


@strawberry.type(description="Who is asking, so a UI can hide what it may not do.")
class Viewer:
    user_id: str
    project_id: strawberry.ID
    project_name: str
    consumer: Consumer
    grant: Grant

    @strawberry.field(
        description="Where the event log stands now: pass it as `since` to `memoryEvents` to"
        " receive every change committed after this read, however long the subscription takes"
        " to start (a subscription without `since` starts once it is set up)."
    )
    async def event_cursor(self, info: strawberry.Info) -> str:
        context: Context = info.context
        return await context.service.event_cursor(context.principal)


@strawberry.type(description="A change to a memory the subscriber may read.")
class MemoryEvent:
    cursor: str = strawberry.field(
        description="Position in the event log; pass it as `since` to resume after this event."
    )
    type: str = strawberry.field(description=f"{model.or_list(model.EventType)}.")
    scope: MemoryScope
    memory_id: strawberry.ID | None = strawberry.field(
        description="The memory changed (for memory.superseded, the new version); null when a"
        " user's memories were erased at once."
    )
    memory: Memory | None = strawberry.field(
        description="The memory as the list shows it now (retired ones with invalidatedAt);"
        " null once erased."
    )
    actor_id: str | None = strawberry.field(
        description="The user whose request made the change, on user-scope events (the reader"
        " itself); null on project-scope events, which never tell one user who else changed"
        " the shared memories (the project's own webhooks do name the user)."
    )
    changed_at: datetime = strawberry.field(
        description="When the change was made: when the write that made it began (every event"
        " of one write shares it). Events are ordered by cursor, not by this time. A memory's"
        " `occurredAt` is another time: when what the memory describes happened."
    )
    # results of selections already executed on this event (graphql/rendering.py)
    renders: strawberry.Private[dict[Any, Any] | None] = None

    @classmethod
    def from_domain(cls, e: model.MemoryEvent, *, name_actor: bool = False) -> MemoryEvent:
        """The event as an app user reads it; `name_actor` for the project's own backend."""
        return cls(
            cursor=str(e.cursor),
            type=str(e.type),
            scope=e.scope,
            memory_id=strawberry.ID(str(e.memory_id)) if e.memory_id else None,
            memory=Memory.from_domain(e.memory) if e.memory else None,
            # the same for every user reading the event: a user-scope event is read by its
            # owner only, who made it; a project-scope one by the whole project
            actor_id=e.actor_id if name_actor or e.scope is model.Scope.USER else None,
            changed_at=e.changed_at,
        )

    @strawberry.field(
        description="The former name of `changedAt`, for this release only.",
        deprecation_reason="Use `changedAt`, the same time (a memory's `occurredAt` is another).",
    )
    def occurred_at(self) -> datetime:
        return self.changed_at


@strawberry.type
class WebhookState:
    """What the project's API and the admin API both show of an endpoint (each adds its own
    fields); not a type of either schema by itself."""

    id: strawberry.ID
    url: str
    events: list[str] | None = strawberry.field(
        description="The event types it receives; null: every type."
    )
    created_at: datetime
    acked_cursor: str = strawberry.field(
        description="The last event its receiver acknowledged; delivery resumes after it."
    )
    failures: int = strawberry.field(description="Failed attempts since the last delivery.")
    last_error: str | None
    last_error_at: datetime | None
    next_attempt_at: datetime | None = strawberry.field(
        description="When a failed delivery is tried again."
    )
    last_delivered_at: datetime | None

    @staticmethod
    def state_of(w: model.Webhook) -> dict[str, Any]:
        """The shared fields of `w`, as keyword arguments."""
        return {
            "id": strawberry.ID(str(w.id)),
            "url": w.url,
            "events": list(w.event_types) if w.event_types is not None else None,
            "created_at": w.created_at,
            "acked_cursor": str(w.acked_cursor),
            "failures": w.failures,
            "last_error": w.last_error,
            "last_error_at": w.last_error_at,
            "next_attempt_at": w.next_attempt_at,
            "last_delivered_at": w.last_delivered_at,
        }


@strawberry.type(description="An HTTP endpoint that receives the project's memory events.")
class Webhook(WebhookState):
    pending_count: int = strawberry.field(description="Events it has still to receive.")

    @classmethod
    def from_domain(cls, w: model.Webhook) -> Webhook:
        return cls(**cls.state_of(w), pending_count=w.pending or 0)


@strawberry.type
class AddWebhookPayload:
    webhook: Webhook
    secret: str = strawberry.field(
        description="The key of the HMAC-SHA256 in each POST's Memql-Signature header; shown"
        " only here."
    )


IdArg = Annotated[strawberry.ID, strawberry.argument(description="A memory id (UUID).")]
