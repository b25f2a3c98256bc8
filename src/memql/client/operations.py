"""Each API operation once: its GraphQL document, its variables and how to read its answer.

`Client` and `AsyncClient` only differ in how they send an `Operation`; everything else lives
here, so the two stay the same API by construction.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypedDict, TypeVar, Unpack

from memql.client.types import (
    MEMORY_FIELDS,
    Memory,
    MemoryContext,
    Page,
    RecallHit,
    SaveResult,
    SupersedeResult,
    Viewer,
    Webhook,
)
from memql.model import Kind, Scope

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)

Id = uuid.UUID | str


@dataclass(frozen=True)
class Operation(Generic[T]):
    document: str
    variables: dict[str, Any]
    parse: Callable[[dict[str, Any]], T]


def _name(enum_type: type[E], value: E | str) -> str:
    """An enum's GraphQL name from the enum or its name or value in any case."""
    if isinstance(value, enum_type):
        return value.name
    text = str(value)
    for member in enum_type:
        if text.upper() == member.name or text == member.value:
            return member.name
    raise ValueError(f"{text!r} is not a {enum_type.__name__}")


def _instant(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _vars(**values: Any) -> dict[str, Any]:
    """Variables without the unset ones, so the server's defaults apply."""
    return {k: v for k, v in values.items() if v is not None}


@dataclass(frozen=True)
class MemoryInput:
    """A memory to save (one item of `save_many`, or the new version of `supersede`)."""

    content: str
    kind: Kind | str
    scope: Scope | str | None = None
    key: str | None = None
    category: str | None = None
    pinned: bool = False
    source_thread_ids: Iterable[str] = field(default=())
    source: dict[str, Any] | None = None
    expires_at: datetime | None = None
    occurred_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return _vars(
            content=self.content,
            kind=_name(Kind, self.kind),
            scope=_name(Scope, self.scope) if self.scope is not None else None,
            key=self.key,
            category=self.category,
            pinned=self.pinned,
            sourceThreadIds=list(self.source_thread_ids),
            source=self.source,
            expiresAt=_instant(self.expires_at),
            occurredAt=_instant(self.occurred_at),
        )


class SaveOptions(TypedDict, total=False):
    """The optional parts of a save; see `MemoryInput`."""

    scope: Scope | str | None
    key: str | None
    category: str | None
    pinned: bool
    source_thread_ids: Iterable[str]
    source: dict[str, Any] | None
    expires_at: datetime | None
    occurred_at: datetime | None


class ListOptions(TypedDict, total=False):
    """Filters and paging of `memories`: newest first, `first` per page (at most 200)."""

    scope: Scope | str | None
    kind: Kind | str | None
    category: str | None
    pinned: bool | None
    contains: str | None
    include_invalidated: bool
    occurred_after: datetime | None
    occurred_before: datetime | None
    created_after: datetime | None
    created_before: datetime | None
    updated_after: datetime | None
    updated_before: datetime | None
    # memories whose `source` contains this object (JSON containment)
    source: dict[str, Any] | None
    # "created_at" (default) or "updated_at", and "desc" (default) or "asc"
    order_by: str | None
    direction: str | None
    first: int
    after: str | None
    last: int
    before: str | None
    # ask the server to count every memory the filters match (one more query)
    total_count: bool


class RecallOptions(TypedDict, total=False):
    limit: int
    scope: Scope | str | None
    kinds: Iterable[Kind | str] | None
    categories: Iterable[str] | None
    occurred_after: datetime | None
    occurred_before: datetime | None
    # drop hits scoring below this, in [0, 1]
    min_score: float | None


SAVE_PAYLOAD = f"""
  outcome
  memory {{ {MEMORY_FIELDS} }}
  nearDuplicates {{ similarity memory {{ {MEMORY_FIELDS} }} }}
  superseded {{ {MEMORY_FIELDS} }}
"""


def viewer() -> Operation[Viewer]:
    return Operation(
        """query Viewer { viewer {
          userId projectId projectName consumer grant { user project } } }""",
        {},
        lambda data: Viewer.from_json(data["viewer"]),
    )


def event_cursor() -> Operation[str]:
    return Operation(
        "query EventCursor { viewer { eventCursor } }",
        {},
        lambda data: str(data["viewer"]["eventCursor"]),
    )


def memory(id: Id) -> Operation[Memory | None]:
    return Operation(
        f"query Memory($id: ID!) {{ memory(id: $id) {{ {MEMORY_FIELDS} }} }}",
        {"id": str(id)},
        lambda data: Memory.from_json(data["memory"]) if data["memory"] else None,
    )


# the arguments of `memories`, each with its GraphQL type (spelt once for the document)
_LIST_ARGUMENTS = {
    "scope": "MemoryScope",
    "kind": "MemoryKind",
    "category": "String",
    "pinned": "Boolean",
    "contains": "String",
    "includeInvalidated": "Boolean",
    "occurredAfter": "DateTime",
    "occurredBefore": "DateTime",
    "createdAfter": "DateTime",
    "createdBefore": "DateTime",
    "updatedAfter": "DateTime",
    "updatedBefore": "DateTime",
    "source": "JSON",
    "orderBy": "MemoryOrder",
    "first": "Int",
    "after": "String",
    "last": "Int",
    "before": "String",
}


def memories(**o: Unpack[ListOptions]) -> Operation[Page]:
    scope, kind = o.get("scope"), o.get("kind")
    order_by, direction = o.get("order_by"), o.get("direction")
    order = None
    if order_by is not None or direction is not None:
        order = _vars(
            field=order_by.upper() if order_by else None,
            direction=direction.upper() if direction else None,
        )
    declared = ", ".join(f"${name}: {kind_}" for name, kind_ in _LIST_ARGUMENTS.items())
    passed = ", ".join(f"{name}: ${name}" for name in _LIST_ARGUMENTS)
    total = "totalCount" if o.get("total_count") else ""
    return Operation(
        f"""query Memories({declared}) {{
          memories({passed}) {{
            edges {{ cursor node {{ {MEMORY_FIELDS} }} }}
            pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }}
            {total}
          }}
        }}""",
        _vars(
            scope=_name(Scope, scope) if scope is not None else None,
            kind=_name(Kind, kind) if kind is not None else None,
            category=o.get("category"),
            pinned=o.get("pinned"),
            contains=o.get("contains"),
            includeInvalidated=o.get("include_invalidated"),
            occurredAfter=_instant(o.get("occurred_after")),
            occurredBefore=_instant(o.get("occurred_before")),
            createdAfter=_instant(o.get("created_after")),
            createdBefore=_instant(o.get("created_before")),
            updatedAfter=_instant(o.get("updated_after")),
            updatedBefore=_instant(o.get("updated_before")),
            source=o.get("source"),
            orderBy=order,
            first=o.get("first"),
            after=o.get("after"),
            last=o.get("last"),
            before=o.get("before"),
        ),
        lambda data: Page.from_json(data["memories"]),
    )


def history(id: Id) -> Operation[list[Memory]]:
    return Operation(
        f"query History($id: ID!) {{ memoryHistory(id: $id) {{ {MEMORY_FIELDS} }} }}",
        {"id": str(id)},
        lambda data: [Memory.from_json(m) for m in data["memoryHistory"]],
    )


def recall(query: str, **o: Unpack[RecallOptions]) -> Operation[list[RecallHit]]:
    scope, kinds, categories = o.get("scope"), o.get("kinds"), o.get("categories")
    return Operation(
        f"""query Recall($query: String!, $limit: Int, $scope: MemoryScope,
              $kinds: [MemoryKind!], $categories: [String!],
              $occurredAfter: DateTime, $occurredBefore: DateTime, $minScore: Float) {{
          recall(query: $query, limit: $limit, scope: $scope, kinds: $kinds,
                 categories: $categories, occurredAfter: $occurredAfter,
                 occurredBefore: $occurredBefore, minScore: $minScore) {{
            score signals {{ vector lexical recency pinned }} memory {{ {MEMORY_FIELDS} }}
          }}
        }}""",
        _vars(
            query=query,
            limit=o.get("limit"),
            scope=_name(Scope, scope) if scope is not None else None,
            kinds=[_name(Kind, k) for k in kinds] if kinds is not None else None,
            categories=list(categories) if categories is not None else None,
            occurredAfter=_instant(o.get("occurred_after")),
            occurredBefore=_instant(o.get("occurred_before")),
            minScore=o.get("min_score"),
        ),
        lambda data: [RecallHit.from_json(h) for h in data["recall"]],
    )


def context(query: str | None = None, budget: int | None = None) -> Operation[MemoryContext]:
    return Operation(
        """query Context($query: String, $budget: Int) {
          memoryContext(query: $query, budget: $budget) { text count omitted } }""",
        _vars(query=query, budget=budget),
        lambda data: MemoryContext(**data["memoryContext"]),
    )


def save(content: str, kind: Kind | str, **options: Unpack[SaveOptions]) -> Operation[SaveResult]:
    item = MemoryInput(content, kind, **options)
    return Operation(
        f"""mutation Save($input: SaveMemoryInput!) {{
          saveMemory(input: $input) {{ {SAVE_PAYLOAD} }} }}""",
        {"input": item.to_json()},
        lambda data: SaveResult.from_json(data["saveMemory"]),
    )


def save_many(items: Iterable[MemoryInput]) -> Operation[list[SaveResult]]:
    return Operation(
        f"""mutation SaveMany($inputs: [SaveMemoryInput!]!) {{
          saveMemories(inputs: $inputs) {{ {SAVE_PAYLOAD} }} }}""",
        {"inputs": [item.to_json() for item in items]},
        lambda data: [SaveResult.from_json(r) for r in data["saveMemories"]],
    )


def supersede(
    new: MemoryInput,
    *,
    id: Id | None = None,
    key: str | None = None,
    scope: Scope | str | None = None,
) -> Operation[SupersedeResult]:
    return Operation(
        f"""mutation Supersede($input: SaveMemoryInput!, $id: ID, $key: String,
              $scope: MemoryScope) {{
          supersedeMemory(input: $input, id: $id, key: $key, scope: $scope) {{
            memory {{ {MEMORY_FIELDS} }}
            superseded {{ {MEMORY_FIELDS} }}
            nearDuplicates {{ similarity memory {{ {MEMORY_FIELDS} }} }}
          }}
        }}""",
        _vars(
            input=new.to_json(),
            id=str(id) if id is not None else None,
            key=key,
            scope=_name(Scope, scope) if scope is not None else None,
        ),
        lambda data: SupersedeResult.from_json(data["supersedeMemory"]),
    )


def retire(
    id: Id | None = None, *, key: str | None = None, scope: Scope | str | None = None
) -> Operation[Memory]:
    return Operation(
        f"""mutation Retire($id: ID, $key: String, $scope: MemoryScope) {{
          retireMemory(id: $id, key: $key, scope: $scope) {{ {MEMORY_FIELDS} }} }}""",
        _vars(
            id=str(id) if id is not None else None,
            key=key,
            scope=_name(Scope, scope) if scope is not None else None,
        ),
        lambda data: Memory.from_json(data["retireMemory"]),
    )


def restore(id: Id) -> Operation[Memory]:
    return Operation(
        f"mutation Restore($id: ID!) {{ restoreMemory(id: $id) {{ {MEMORY_FIELDS} }} }}",
        {"id": str(id)},
        lambda data: Memory.from_json(data["restoreMemory"]),
    )


def erase(id: Id) -> Operation[int]:
    return Operation(
        "mutation Erase($id: ID!) { eraseMemory(id: $id) { erased } }",
        {"id": str(id)},
        lambda data: int(data["eraseMemory"]["erased"]),
    )


def erase_user_memories() -> Operation[int]:
    return Operation(
        "mutation EraseAll { eraseUserMemories { erased } }",
        {},
        lambda data: int(data["eraseUserMemories"]["erased"]),
    )


WEBHOOK_FIELDS = """
  id url events createdAt ackedCursor pendingCount failures lastError lastErrorAt
  nextAttemptAt lastDeliveredAt
"""


def webhooks() -> Operation[list[Webhook]]:
    return Operation(
        f"query Webhooks {{ webhooks {{ {WEBHOOK_FIELDS} }} }}",
        {},
        lambda data: [Webhook.from_json(w) for w in data["webhooks"]],
    )


def add_webhook(url: str, events: Iterable[str] | None = None) -> Operation[tuple[Webhook, str]]:
    return Operation(
        f"""mutation AddWebhook($url: String!, $events: [String!]) {{
          addWebhook(url: $url, events: $events) {{ secret webhook {{ {WEBHOOK_FIELDS} }} }} }}""",
        _vars(url=url, events=list(events) if events is not None else None),
        lambda data: (
            Webhook.from_json(data["addWebhook"]["webhook"]),
            str(data["addWebhook"]["secret"]),
        ),
    )


def remove_webhook(id: Id) -> Operation[bool]:
    return Operation(
        "mutation RemoveWebhook($id: ID!) { removeWebhook(id: $id) }",
        {"id": str(id)},
        lambda data: bool(data["removeWebhook"]),
    )
