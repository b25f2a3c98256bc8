"""Events as they travel between instances: one JSON text per event, on one channel per owner."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime
from typing import Any

from memql.model import Kind, Memory, MemoryEvent, Scope

CHANNEL_PREFIX = "memql:events"


def channel(project_id: uuid.UUID, scope: Scope, owner_id: str) -> str:
    """The channel of one owner's events: an instance subscribes only to the owners its
    subscribers follow. User ids are hashed to keep channel names short and plain."""
    if scope is Scope.PROJECT:
        return f"{CHANNEL_PREFIX}:{project_id}:project"
    digest = hashlib.sha256(owner_id.encode()).hexdigest()[:32]
    return f"{CHANNEL_PREFIX}:{project_id}:user:{digest}"


def event_channel(event: MemoryEvent) -> str:
    return channel(event.project_id, event.scope, event.owner_id)


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value is not None else None


def _uuid(value: str | None) -> uuid.UUID | None:
    return uuid.UUID(value) if value is not None else None


def _memory_json(m: Memory) -> dict[str, Any]:
    return {
        "id": str(m.id),
        "project_id": str(m.project_id),
        "scope": m.scope.value,
        "owner_id": m.owner_id,
        "kind": m.kind.value,
        "content": m.content,
        "key": m.key,
        "category": m.category,
        "pinned": m.pinned,
        "source_thread_ids": list(m.source_thread_ids),
        "source": m.source,
        "created_by": m.created_by,
        "created_at": _time(m.created_at),
        "updated_at": _time(m.updated_at),
        "expires_at": _time(m.expires_at),
        "invalidated_at": _time(m.invalidated_at),
        "invalidation_reason": m.invalidation_reason,
        "supersedes": str(m.supersedes) if m.supersedes else None,
        "superseded_by": str(m.superseded_by) if m.superseded_by else None,
        "embedding_model": m.embedding_model,
    }


def _memory(d: dict[str, Any]) -> Memory:
    created_at = _parse_time(d["created_at"])
    updated_at = _parse_time(d["updated_at"])
    assert created_at is not None and updated_at is not None
    return Memory(
        id=uuid.UUID(d["id"]),
        project_id=uuid.UUID(d["project_id"]),
        scope=Scope(d["scope"]),
        owner_id=d["owner_id"],
        kind=Kind(d["kind"]),
        content=d["content"],
        key=d["key"],
        category=d["category"],
        pinned=d["pinned"],
        source_thread_ids=tuple(d["source_thread_ids"]),
        source=d["source"],
        created_by=d["created_by"],
        created_at=created_at,
        updated_at=updated_at,
        expires_at=_parse_time(d["expires_at"]),
        invalidated_at=_parse_time(d["invalidated_at"]),
        invalidation_reason=d["invalidation_reason"],
        supersedes=_uuid(d["supersedes"]),
        superseded_by=_uuid(d["superseded_by"]),
        embedding_model=d["embedding_model"],
    )


def encode(event: MemoryEvent) -> str:
    return json.dumps(
        {
            "cursor": event.cursor,
            "project_id": str(event.project_id),
            "scope": event.scope.value,
            "owner_id": event.owner_id,
            "type": event.type,
            "memory_id": str(event.memory_id) if event.memory_id else None,
            "actor_id": event.actor_id,
            "occurred_at": _time(event.occurred_at),
            "memory": _memory_json(event.memory) if event.memory else None,
        },
        separators=(",", ":"),
    )


def decode(text: str) -> MemoryEvent:
    d = json.loads(text)
    occurred_at = _parse_time(d["occurred_at"])
    assert occurred_at is not None
    return MemoryEvent(
        cursor=int(d["cursor"]),
        project_id=uuid.UUID(d["project_id"]),
        scope=Scope(d["scope"]),
        owner_id=d["owner_id"],
        type=d["type"],
        memory_id=_uuid(d["memory_id"]),
        actor_id=d["actor_id"],
        occurred_at=occurred_at,
        memory=_memory(d["memory"]) if d["memory"] else None,
    )
