"""Events as they travel between instances: one JSON text per event, on one channel per project.

Each message carries, beside the event, the credential epoch of the snapshot the relay read
the event in (`db.events.read_committed`): a stream delivers the event only on credentials
confirmed at that epoch or later (realtime/recheck.py), with no read of its own."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from memql.model import EventType, MemoryEvent, Scope
from memql.rules.codec import memory_from_dict, memory_to_dict, parse_time

CHANNEL_PREFIX = "memql:events"


def channel(project_id: uuid.UUID) -> str:
    """The channel of one project's events.

    One channel per project, not per owner: the relay publishes in cursor order, and only one
    channel keeps that order all the way to a subscriber that follows several owners (its own
    and the project's). Over two channels, two readers could hand a later cursor on before an
    earlier one, and the earlier one would then be dropped as already seen."""
    return f"{CHANNEL_PREFIX}:{project_id}"


def route(scope: Scope, owner_id: str) -> str:
    """Within a project's channel, the key of one owner's events."""
    return "project" if scope is Scope.PROJECT else f"user:{owner_id}"


def event_channel(event: MemoryEvent) -> str:
    return channel(event.project_id)


def event_route(event: MemoryEvent) -> str:
    return route(event.scope, event.owner_id)


@dataclass(frozen=True)
class Relayed:
    """A decoded message: the event and the credential epoch it was read at (None from a
    sender that did not say: the receiver must read the epoch itself, after the arrival)."""

    event: MemoryEvent
    epoch: int | None


def encode(event: MemoryEvent, epoch: int) -> str:
    """`epoch`: the credential epoch in the snapshot that read `event`."""
    return json.dumps(
        {
            "cursor": event.cursor,
            "project_id": str(event.project_id),
            "scope": event.scope.value,
            "owner_id": event.owner_id,
            "type": str(event.type),
            "memory_id": str(event.memory_id) if event.memory_id else None,
            "actor_id": event.actor_id,
            "changed_at": event.changed_at.isoformat(),
            "memory": memory_to_dict(event.memory) if event.memory else None,
            "credential_epoch": epoch,
        },
        separators=(",", ":"),
    )


def decode(text: str) -> Relayed:
    d = json.loads(text)
    # "occurred_at": the key's name before this release, from a relay that has not been upgraded
    changed_at = parse_time(d["changed_at"] if "changed_at" in d else d["occurred_at"])
    assert changed_at is not None
    epoch = d.get("credential_epoch")
    event = MemoryEvent(
        cursor=int(d["cursor"]),
        project_id=uuid.UUID(d["project_id"]),
        scope=Scope(d["scope"]),
        owner_id=d["owner_id"],
        type=EventType(d["type"]),
        memory_id=uuid.UUID(d["memory_id"]) if d["memory_id"] else None,
        actor_id=d["actor_id"],
        changed_at=changed_at,
        memory=memory_from_dict(d["memory"]) if d["memory"] else None,
    )
    return Relayed(event, None if epoch is None else int(epoch))
