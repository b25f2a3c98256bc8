"""Each API operation once: its GraphQL document, its variables and how to read its answer.

`Client` and `AsyncClient` only differ in how they send an `Operation`; everything else lives
here, so the two stay the same API by construction.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Unpack

from memql import requests
from memql.client.arguments import arguments, input_json
from memql.client.records import DraftFields, FilterFields, ListFields, RecallFields, SaveFields
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
from memql.model import Kind, Order, OrderField, Scope, SortDirection
from memql.requests import (
    ContextQuery,
    MemoryDraft,
    MemoryFilter,
    MemoryRef,
    PageRequest,
    RecallQuery,
)

T = TypeVar("T")

Id = uuid.UUID | str


@dataclass(frozen=True)
class Operation(Generic[T]):
    document: str
    variables: dict[str, Any]
    parse: Callable[[dict[str, Any]], T]


def _vars(**values: Any) -> dict[str, Any]:
    """Variables without the unset ones, so the server's defaults apply."""
    return {k: v for k, v in values.items() if v is not None}


@dataclass(frozen=True)
class MemoryInput(DraftFields):
    """A memory to save (one item of `save_many`, or the new version of `supersede`): a
    `memql.requests.MemoryDraft` that takes enums by name or value and any iterable of
    thread ids (its fields: `records.DraftFields`)."""

    def to_json(self) -> dict[str, Any]:
        """The `SaveMemoryInput` of this memory (each field is a `MemoryDraft`'s)."""
        return input_json(MemoryDraft, self)


class SaveOptions(SaveFields, total=False):
    """The optional parts of a save; see `MemoryInput`."""


class FilterOptions(FilterFields, total=False):
    """Which memories a read admits (`memql.requests.MemoryFilter`): a filter left out admits
    every memory."""


class ListOptions(FilterOptions, ListFields, total=False):
    """Filters and paging of `memories`: newest first, `first` per page (at most 200)."""

    # "created_at" (default) or "updated_at", and "desc" (default) or "asc"
    order_by: str | None
    direction: str | None
    # ask the server to count every memory the filters match (one more query)
    total_count: bool


class RecallOptions(FilterOptions, RecallFields, total=False):
    """Filters and size of a recall."""


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


# the filter's former names (`kind`, `category`) and the lists each gives one value of
_FORMER_NAMES = [(a.api.was, a.name) for a in requests.arguments(MemoryFilter) if a.api.was]


def _former_names(o: ListOptions) -> dict[str, Any]:
    """The options with the deprecated former names as the lists they stand for."""
    values: dict[str, Any] = dict(o)
    for former, name in _FORMER_NAMES:
        if values.get(former) is not None:
            warnings.warn(
                f"`{former}` is deprecated: pass `{name}` (a list)", DeprecationWarning, 3
            )
            if values.get(name) is not None:
                raise ValueError(f"pass `{name}` or `{former}`, not both")
            values[name] = [values.pop(former)]
    return values


def memories(**o: Unpack[ListOptions]) -> Operation[Page]:
    values = _former_names(o)
    order_by, direction = values.pop("order_by", None), values.pop("direction", None)
    if order_by is not None or direction is not None:
        values["order"] = Order(
            OrderField(order_by.lower()) if order_by else OrderField.CREATED_AT,
            SortDirection(direction.lower()) if direction else SortDirection.DESC,
        )
    args = arguments((MemoryFilter, PageRequest), values)
    total = "totalCount" if o.get("total_count") else ""
    return Operation(
        f"""query Memories({args.declared}) {{
          memories({args.passed}) {{
            edges {{ cursor node {{ {MEMORY_FIELDS} }} }}
            pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }}
            {total}
          }}
        }}""",
        args.variables,
        lambda data: Page.from_json(data["memories"]),
    )


def history(id: Id) -> Operation[list[Memory]]:
    return Operation(
        f"query History($id: ID!) {{ memoryHistory(id: $id) {{ {MEMORY_FIELDS} }} }}",
        {"id": str(id)},
        lambda data: [Memory.from_json(m) for m in data["memoryHistory"]],
    )


def recall(query: str, **o: Unpack[RecallOptions]) -> Operation[list[RecallHit]]:
    args = arguments((RecallQuery,), {**o, "text": query})
    return Operation(
        f"""query Recall({args.declared}) {{
          recall({args.passed}) {{
            score signals {{ vector lexical recency pinned redundancy }}
            memory {{ {MEMORY_FIELDS} }}
          }}
        }}""",
        args.variables,
        lambda data: [RecallHit.from_json(h) for h in data["recall"]],
    )


def context(
    query: str | None = None, budget: int | None = None, **o: Unpack[FilterOptions]
) -> Operation[MemoryContext]:
    args = arguments((ContextQuery,), {**o, "text": query, "budget": budget})
    return Operation(
        f"""query Context({args.declared}) {{
          memoryContext({args.passed}) {{ text count omitted }} }}""",
        args.variables,
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
    ref = arguments((MemoryRef,), {"id": id, "key": key, "scope": scope})
    return Operation(
        f"""mutation Supersede($input: SaveMemoryInput!, {ref.declared}) {{
          supersedeMemory(input: $input, {ref.passed}) {{
            memory {{ {MEMORY_FIELDS} }}
            superseded {{ {MEMORY_FIELDS} }}
            nearDuplicates {{ similarity memory {{ {MEMORY_FIELDS} }} }}
          }}
        }}""",
        {"input": new.to_json(), **ref.variables},
        lambda data: SupersedeResult.from_json(data["supersedeMemory"]),
    )


def retire(
    id: Id | None = None, *, key: str | None = None, scope: Scope | str | None = None
) -> Operation[Memory]:
    ref = arguments((MemoryRef,), {"id": id, "key": key, "scope": scope})
    return Operation(
        f"""mutation Retire({ref.declared}) {{
          retireMemory({ref.passed}) {{ {MEMORY_FIELDS} }} }}""",
        ref.variables,
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
