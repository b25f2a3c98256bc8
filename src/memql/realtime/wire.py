"""Events as they travel between instances: one JSON text per event, on one channel per owner."""

from __future__ import annotations

import hashlib
import json
import uuid

from memql.codec import memory_from_dict, memory_to_dict, parse_time
from memql.model import MemoryEvent, Scope

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
            "occurred_at": event.occurred_at.isoformat(),
            "memory": memory_to_dict(event.memory) if event.memory else None,
        },
        separators=(",", ":"),
    )


def decode(text: str) -> MemoryEvent:
    d = json.loads(text)
    occurred_at = parse_time(d["occurred_at"])
    assert occurred_at is not None
    return MemoryEvent(
        cursor=int(d["cursor"]),
        project_id=uuid.UUID(d["project_id"]),
        scope=Scope(d["scope"]),
        owner_id=d["owner_id"],
        type=d["type"],
        memory_id=uuid.UUID(d["memory_id"]) if d["memory_id"] else None,
        actor_id=d["actor_id"],
        occurred_at=occurred_at,
        memory=memory_from_dict(d["memory"]) if d["memory"] else None,
    )
