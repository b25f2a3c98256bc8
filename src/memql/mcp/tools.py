"""The MCP tools: argument schemas, which tools a grant offers, and their calls on the service.

Each tool parses its arguments, calls `MemoryService` and maps the result to JSON an agent can
act on. Validation, grants and events stay in the service; nothing here touches SQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, cast

from memql import requests
from memql.mcp.arguments import Args, record_of, tool_args
from memql.model import (
    Grant,
    Memory,
    NearDuplicate,
    Principal,
    SaveResult,
    Scope,
)
from memql.requests import MemoryDraft, MemoryFilter, MemoryRef, PageRequest, RecallQuery
from memql.rules.codec import json_value
from memql.service import MemoryService
from memql.words import API_KEY

# the service's names that the tools spell otherwise (the records' own say so themselves)
_TOOL_ARGUMENTS = requests.renames("mcp")


def tool_argument(name: str) -> str:
    """A field or argument of the service as the tools name it."""
    return _TOOL_ARGUMENTS.get(name, name)


RecallArgs = tool_args("RecallArgs", RecallQuery)
# the former names of a list's filter (`kind`, `category`), deprecated: kept for one release
ListArgs = tool_args("ListArgs", MemoryFilter, PageRequest, former_names=True)


# what the tools say of a memory to save: everything but its provenance object, which the
# tools write themselves (`via: mcp` and the tool); a supersede's key and scope name the memory
# it replaces, whose key and scope the new version keeps
SAVED = requests.less(MemoryDraft, "source")
SUPERSEDING = requests.less(MemoryDraft, "key", "scope", "source")
SaveArgs = tool_args("SaveArgs", SAVED)
SupersedeArgs = tool_args("SupersedeArgs", SUPERSEDING, MemoryRef)
ForgetArgs = tool_args("ForgetArgs", MemoryRef)


def _draft(part: requests.Part, a: Args, tool: str) -> MemoryDraft:
    # record_of cannot say which record: a part given here is SAVED or SUPERSEDING, a MemoryDraft
    return replace(cast(MemoryDraft, record_of(part, a)), source={"via": "mcp", "tool": tool})


# --- results ------------------------------------------------------------------------------


# what agents see of a memory: the fields shown to them (`model.Memory`, `Api.for_agents`)
AGENT_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(Memory)
    if f.metadata[API_KEY].shown and f.metadata[API_KEY].for_agents
)


def memory_json(m: Memory) -> dict[str, Any]:
    return {name: json_value(getattr(m, name)) for name in AGENT_FIELDS}


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


async def _recall(service: MemoryService, principal: Principal, a: Args) -> dict[str, Any]:
    hits = await service.recall(principal, record_of(RecallQuery, a))
    return {
        "memories": [{**memory_json(h.memory), "score": round(h.score, 4)} for h in hits],
    }


async def _list(service: MemoryService, principal: Principal, a: Args) -> dict[str, Any]:
    page = await service.list_memories(
        principal, record_of(MemoryFilter, a), record_of(PageRequest, a)
    )
    return {
        "memories": [memory_json(m) for m in page.memories],
        "next_cursor": page.end_cursor if page.has_next_page else None,
    }


async def _save(service: MemoryService, principal: Principal, a: Args) -> dict[str, Any]:
    result = await service.save(principal, _draft(SAVED, a, "save_memory"))
    return save_json(result)


async def _supersede(service: MemoryService, principal: Principal, a: Args) -> dict[str, Any]:
    draft = _draft(SUPERSEDING, a, "supersede_memory")
    result = await service.supersede(principal, draft, record_of(MemoryRef, a))
    return save_json(result)


async def _forget(service: MemoryService, principal: Principal, a: Args) -> dict[str, Any]:
    memory = await service.retire(principal, record_of(MemoryRef, a))
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
        " version, which keeps its key and scope. Prefer this to saving a second copy of the"
        " same fact.",
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


def tool_names(principal: Principal) -> list[str]:
    """The names of the tools `principal` is offered, in a stable order."""
    return [t.name for t in tools_for(principal.grant)]
