"""The MCP tools: argument schemas, which tools a grant offers, and their calls on the service.

Each tool parses its arguments, calls `MemoryService` and maps the result to JSON an agent can
act on. Validation, grants and events stay in the service; nothing here touches SQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from memql.model import (
    Grant,
    Kind,
    Memory,
    NearDuplicate,
    NewMemory,
    Principal,
    SaveResult,
    Scope,
)
from memql.rules.validation import parse_id
from memql.service import MemoryService
from memql.settings import LIMITS

KindName = Literal["topical", "episodic", "operational"]
ScopeName = Literal["user", "project"]

KIND_HELP = (
    "topical: a stable fact or preference; episodic: a dated one-off event; operational: a"
    " procedure to follow."
)
SCOPE_HELP = "user: private to the user you act for (default); project: shared across the project."
OCCURRED_AFTER_HELP = "Only memories of events that happened at or after this (ISO 8601)."
OCCURRED_BEFORE_HELP = "Only memories of events that happened before this (ISO 8601)."


# the service's names that the tools spell otherwise; every other name is the same
_TOOL_ARGUMENTS = {"include_invalidated": "include_forgotten", "memory_id": "id"}


def tool_argument(name: str) -> str:
    """A field or argument of the service as the tools name it."""
    return _TOOL_ARGUMENTS.get(name, name)


class _Schema(GenerateJsonSchema):
    """JSON schemas without `anyOf [..., null]` for optional arguments: leaving an argument out
    is how an agent says "none", and plain types are easier for models to fill in."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])


class Args(BaseModel):
    # unknown arguments are an error, never ignored (`additionalProperties: false`)
    model_config = ConfigDict(extra="forbid")

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        schema = cls.model_json_schema(schema_generator=_Schema)
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
            if prop.get("default", 0) is None:
                prop.pop("default")
        return schema


class RecallArgs(Args):
    query: str = Field(
        description="What you want to remember, in plain words (a question or topic).",
        min_length=1,
    )
    limit: int | None = Field(
        None,
        ge=1,
        le=LIMITS.recall_max,
        description=f"How many memories to return, best first (default {LIMITS.recall_default}).",
    )
    scope: ScopeName | None = Field(None, description=f"Only this scope. {SCOPE_HELP}")
    kinds: list[KindName] | None = Field(None, description=f"Only these kinds. {KIND_HELP}")
    categories: list[str] | None = Field(None, description="Only these categories.")
    occurred_after: datetime | None = Field(None, description=OCCURRED_AFTER_HELP)
    occurred_before: datetime | None = Field(None, description=OCCURRED_BEFORE_HELP)
    min_score: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Only memories scoring at least this (0..1); e.g. 0.3 keeps out memories"
        " unrelated to the query.",
    )


class ListArgs(Args):
    scope: ScopeName | None = Field(None, description=f"Only this scope. {SCOPE_HELP}")
    kind: KindName | None = Field(None, description=f"Only this kind. {KIND_HELP}")
    category: str | None = Field(None, description="Only this category.")
    pinned: bool | None = Field(None, description="Only pinned (true) or unpinned (false).")
    contains: str | None = Field(None, description="Only memories whose text contains this.")
    include_forgotten: bool = Field(
        False, description="Also list forgotten, superseded and expired versions."
    )
    occurred_after: datetime | None = Field(None, description=OCCURRED_AFTER_HELP)
    occurred_before: datetime | None = Field(None, description=OCCURRED_BEFORE_HELP)
    first: int | None = Field(
        None,
        ge=1,
        le=LIMITS.list_max,
        description=f"Page size, newest first (default {LIMITS.list_default}).",
    )
    after: str | None = Field(None, description="`next_cursor` of the previous page.")


class _MemoryFields(Args):
    content: str = Field(
        description="The statement, self-contained and in the third person"
        f' ("Prefers concise status updates."), 1..{LIMITS.content_chars} characters.',
        min_length=1,
    )
    kind: KindName = Field(description=KIND_HELP)
    category: str | None = Field(
        None, description="A short label such as `preferences` or `work` (default `general`)."
    )
    pinned: bool = Field(
        False, description="Always put it first in the context block; for standing rules."
    )
    source_thread_ids: list[str] | None = Field(
        None,
        description="Ids of the conversations this came from (provenance, up to"
        f" {LIMITS.source_thread_ids}).",
    )
    expires_at: datetime | None = Field(
        None, description="ISO 8601 instant after which the memory no longer applies."
    )
    occurred_at: datetime | None = Field(
        None,
        description="For an episodic memory: when the event happened (ISO 8601 date or"
        " instant, UTC unless it says otherwise).",
    )

    def to_new(self, scope: Scope | None, key: str | None, tool: str) -> NewMemory:
        return NewMemory(
            content=self.content,
            kind=Kind(self.kind),
            scope=scope,
            key=key,
            category=self.category,
            pinned=self.pinned,
            source_thread_ids=tuple(self.source_thread_ids or ()),
            source={"via": "mcp", "tool": tool},
            expires_at=self.expires_at,
            occurred_at=self.occurred_at,
        )


class SaveArgs(_MemoryFields):
    key: str | None = Field(
        None,
        description="A stable slug for a fact that gets refined over time (e.g."
        " `preferred-language`). Saving again with a live key replaces that memory.",
    )
    scope: ScopeName | None = Field(None, description=f"Where it lives. {SCOPE_HELP}")


class SupersedeArgs(_MemoryFields):
    id: str | None = Field(None, description="The id of the live memory to replace (or `key`).")
    key: str | None = Field(
        None,
        description="The key of the live memory to replace, instead of `id`. The new version"
        " keeps the old one's key and scope.",
    )
    scope: ScopeName | None = Field(None, description="The scope of `key` (default user).")


class ForgetArgs(Args):
    id: str | None = Field(None, description="The id of the live memory to forget (or `key`).")
    key: str | None = Field(None, description="The key of the live memory to forget.")
    scope: ScopeName | None = Field(None, description="The scope of `key` (default user).")


# --- results ------------------------------------------------------------------------------


def memory_json(m: Memory) -> dict[str, Any]:
    return {
        "id": str(m.id),
        "content": m.content,
        "kind": m.kind.value,
        "scope": m.scope.value,
        "key": m.key,
        "category": m.category,
        "pinned": m.pinned,
        "updated_at": m.updated_at.isoformat(),
        "expires_at": m.expires_at.isoformat() if m.expires_at else None,
        "occurred_at": m.occurred_at.isoformat() if m.occurred_at else None,
        "invalidation_reason": m.invalidation_reason,
    }


def _near_json(near: tuple[NearDuplicate, ...]) -> list[dict[str, Any]]:
    return [
        {
            "id": str(d.memory.id),
            "content": d.memory.content,
            "kind": d.memory.kind.value,
            "key": d.memory.key,
            "similarity": round(d.similarity, 3),
        }
        for d in near
    ]


def save_json(result: SaveResult) -> dict[str, Any]:
    """What a save did, in words an agent can act on."""
    outcome = result.outcome.value.lower()
    body: dict[str, Any] = {"outcome": outcome, "memory": memory_json(result.memory)}
    if outcome == "absorbed":
        body["note"] = (
            f"Already known: merged into the existing memory {result.memory.id}; nothing new was"
            " stored."
        )
    elif outcome == "superseded":
        assert result.superseded is not None
        body["superseded_id"] = str(result.superseded.id)
        body["note"] = f"Replaced the previous version {result.superseded.id} (same key)."
    else:
        body["note"] = "Stored as a new memory."
    body["near_duplicates"] = _near_json(result.near_duplicates)
    if result.near_duplicates:
        body["note"] += (
            " Similar memories exist (listed in near_duplicates): if one states the same fact,"
            " supersede it with supersede_memory instead of keeping two copies."
        )
    return body


# --- tools --------------------------------------------------------------------------------

Call = Callable[[MemoryService, Principal, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    args: type[Args]
    writes: bool
    call: Call


def _scope(name: str | None) -> Scope | None:
    return Scope(name) if name is not None else None


def _memory_id(value: str | None) -> uuid.UUID | None:
    return parse_id(value) if value is not None else None


async def _recall(service: MemoryService, principal: Principal, a: RecallArgs) -> dict[str, Any]:
    hits = await service.recall(
        principal,
        a.query,
        limit=a.limit,
        scope=_scope(a.scope),
        kinds=[Kind(k) for k in a.kinds] if a.kinds is not None else None,
        categories=a.categories,
        occurred_after=a.occurred_after,
        occurred_before=a.occurred_before,
        min_score=a.min_score,
    )
    return {
        "memories": [{**memory_json(h.memory), "score": round(h.score, 4)} for h in hits],
    }


async def _list(service: MemoryService, principal: Principal, a: ListArgs) -> dict[str, Any]:
    page = await service.list_memories(
        principal,
        scope=_scope(a.scope),
        kind=Kind(a.kind) if a.kind is not None else None,
        category=a.category,
        pinned=a.pinned,
        contains=a.contains,
        include_invalidated=a.include_forgotten,
        occurred_after=a.occurred_after,
        occurred_before=a.occurred_before,
        first=a.first,
        after=a.after,
    )
    return {
        "memories": [memory_json(m) for m in page.memories],
        "next_cursor": page.end_cursor if page.has_next_page else None,
    }


async def _save(service: MemoryService, principal: Principal, a: SaveArgs) -> dict[str, Any]:
    result = await service.save(principal, a.to_new(_scope(a.scope), a.key, "save_memory"))
    return save_json(result)


async def _supersede(
    service: MemoryService, principal: Principal, a: SupersedeArgs
) -> dict[str, Any]:
    result = await service.supersede(
        principal,
        a.to_new(None, None, "supersede_memory"),
        memory_id=_memory_id(a.id),
        key=a.key,
        scope=_scope(a.scope),
    )
    return save_json(result)


async def _forget(service: MemoryService, principal: Principal, a: ForgetArgs) -> dict[str, Any]:
    memory = await service.retire(
        principal, memory_id=_memory_id(a.id), key=a.key, scope=_scope(a.scope)
    )
    return {
        "forgotten": memory_json(memory),
        "note": "No longer recalled or listed; the user can restore it.",
    }


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "recall_memory",
        "Recall memories",
        "Find what you already know about the user or the project that is relevant to a"
        " question or topic, best match first. Call it before answering when earlier"
        " conversations may matter.",
        RecallArgs,
        False,
        _recall,
    ),
    ToolSpec(
        "list_memories",
        "List memories",
        "List stored memories, newest first, with optional filters; page with `after`.",
        ListArgs,
        False,
        _list,
    ),
    ToolSpec(
        "save_memory",
        "Save a memory",
        "Remember a durable, reusable fact, preference, event or procedure (never a secret)."
        " The result says `created`, `absorbed` (an equivalent memory already existed; its id"
        " is returned) or `superseded` (the key was live and that memory was replaced), and"
        " lists near-duplicates you may want to supersede instead.",
        SaveArgs,
        True,
        _save,
    ),
    ToolSpec(
        "supersede_memory",
        "Supersede a memory",
        "Replace a live memory (by `id`, or by `key`) with a corrected or refined full"
        " version. Prefer this to saving a second copy of the same fact.",
        SupersedeArgs,
        True,
        _supersede,
    ),
    ToolSpec(
        "forget_memory",
        "Forget a memory",
        "Stop using a memory that is wrong or no longer true (by `id`, or by `key`). It is"
        " retired, not erased: the user can restore it.",
        ForgetArgs,
        True,
        _forget,
    ),
)
BY_NAME = {t.name: t for t in TOOLS}


def tools_for(grant: Grant) -> tuple[ToolSpec, ...]:
    """The tools a grant offers: reading tools when any scope is readable, writing tools when
    any scope is writable, none without a grant. The service still checks each call's scope."""
    can_read = any(grant.for_scope(s).can_read for s in Scope)
    can_write = any(grant.for_scope(s).can_write for s in Scope)
    return tuple(t for t in TOOLS if (can_write if t.writes else can_read))
