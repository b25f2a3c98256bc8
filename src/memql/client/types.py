"""What the client returns: frozen dataclasses mirroring the GraphQL types."""

from __future__ import annotations

import enum
import typing
import uuid
import warnings
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memql.client.records import MemoryFields
from memql.model import (
    Access,
    Consumer,
    ContextBlock,
    SaveOutcome,
    Scope,
    Signals,
    unwrap_optional,
)
from memql.requests import camel


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value is not None else None


def _uuid(value: str | None) -> uuid.UUID | None:
    return uuid.UUID(value) if value is not None else None


@dataclass(frozen=True)
class Memory(MemoryFields):
    """One version of a memory, as the API shows it (its fields: `records.MemoryFields`)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memory:
        """Each field from the GraphQL field of its name (`MEMORY_FIELDS`)."""
        return cls(**{name: read(data[camel(name)]) for name, read in _MEMORY_READERS})


def _reader(hint: Any) -> Any:
    """How a field annotated `hint` is read from JSON (None stays None)."""
    held, _ = unwrap_optional(hint)
    if held is uuid.UUID:
        read: Any = uuid.UUID
    elif held is datetime:
        read = datetime.fromisoformat
    elif isinstance(held, type) and issubclass(held, enum.Enum):
        read = held.__getitem__
    elif typing.get_origin(held) is tuple:
        read = tuple
    else:
        return lambda value: value
    return lambda value: None if value is None else read(value)


_MEMORY_READERS = [(name, _reader(hint)) for name, hint in typing.get_type_hints(Memory).items()]
# the selection that fills a `Memory`: each of its fields, as GraphQL names it
MEMORY_FIELDS = " ".join(camel(name) for name, _ in _MEMORY_READERS)


@dataclass(frozen=True)
class NearDuplicate:
    memory: Memory
    similarity: float


@dataclass(frozen=True)
class SaveResult:
    """What a save did: CREATED, ABSORBED (into `memory`, same id) or SUPERSEDED."""

    outcome: SaveOutcome
    memory: Memory
    near_duplicates: tuple[NearDuplicate, ...]
    superseded: Memory | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SaveResult:
        return cls(
            outcome=SaveOutcome[data["outcome"]],
            memory=Memory.from_json(data["memory"]),
            near_duplicates=_near_duplicates(data["nearDuplicates"]),
            superseded=Memory.from_json(data["superseded"]) if data["superseded"] else None,
        )


@dataclass(frozen=True)
class SupersedeResult:
    memory: Memory
    superseded: Memory
    near_duplicates: tuple[NearDuplicate, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SupersedeResult:
        return cls(
            memory=Memory.from_json(data["memory"]),
            superseded=Memory.from_json(data["superseded"]),
            near_duplicates=_near_duplicates(data["nearDuplicates"]),
        )


def _near_duplicates(items: list[dict[str, Any]]) -> tuple[NearDuplicate, ...]:
    return tuple(NearDuplicate(Memory.from_json(d["memory"]), d["similarity"]) for d in items)


@dataclass(frozen=True)
class RecallHit:
    """One recalled memory; higher score = more relevant, in [0, 1]."""

    memory: Memory
    score: float
    signals: Signals

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecallHit:
        return cls(Memory.from_json(data["memory"]), data["score"], Signals(**data["signals"]))


@dataclass(frozen=True)
class Page:
    """One page of a list; pass `end_cursor` as `after` for the next one, or `start_cursor`
    as `before` (with `last`) for the one before."""

    memories: tuple[Memory, ...]
    cursors: tuple[str, ...]
    has_next_page: bool
    end_cursor: str | None
    has_previous_page: bool = False
    start_cursor: str | None = None
    # counted only when asked for (`total_count=True`)
    total_count: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Page:
        info = data["pageInfo"]
        return cls(
            memories=tuple(Memory.from_json(e["node"]) for e in data["edges"]),
            cursors=tuple(e["cursor"] for e in data["edges"]),
            has_next_page=info["hasNextPage"],
            end_cursor=info["endCursor"],
            has_previous_page=info["hasPreviousPage"],
            start_cursor=info["startCursor"],
            total_count=data.get("totalCount"),
        )


# a markdown block for a system prompt (`text`, `count`, `omitted`): the domain's own type
MemoryContext = ContextBlock


@dataclass(frozen=True)
class Grant:
    user: Access
    project: Access


@dataclass(frozen=True)
class Viewer:
    """Who the client acts as, and what it may do."""

    user_id: str
    project_id: uuid.UUID
    project_name: str
    consumer: Consumer
    grant: Grant

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Viewer:
        return cls(
            user_id=data["userId"],
            project_id=uuid.UUID(data["projectId"]),
            project_name=data["projectName"],
            consumer=Consumer[data["consumer"]],
            grant=Grant(Access[data["grant"]["user"]], Access[data["grant"]["project"]]),
        )


@dataclass(frozen=True)
class MemoryEvent:
    """One change to a memory the caller may read; keep `cursor` to resume after it.

    `changed_at` is when the change was made (the time its write began); a memory's own
    `occurred_at` is when what it describes happened."""

    cursor: str
    type: str
    scope: Scope
    memory_id: uuid.UUID | None
    memory: Memory | None
    actor_id: str | None
    changed_at: datetime

    @property
    def occurred_at(self) -> datetime:
        """Deprecated, for this release only: `changed_at`, under its former name."""
        warnings.warn(
            "MemoryEvent.occurred_at is deprecated: use `changed_at`", DeprecationWarning, 2
        )
        return self.changed_at

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemoryEvent:
        return cls(
            cursor=data["cursor"],
            type=data["type"],
            scope=Scope[data["scope"]],
            memory_id=_uuid(data["memoryId"]),
            memory=Memory.from_json(data["memory"]) if data["memory"] else None,
            actor_id=data.get("actorId"),
            changed_at=datetime.fromisoformat(data["changedAt"]),
        )


@dataclass(frozen=True)
class Webhook:
    """An HTTP endpoint that receives the project's memory events, with its delivery state."""

    id: uuid.UUID
    url: str
    events: tuple[str, ...] | None
    created_at: datetime
    acked_cursor: str
    pending_count: int
    failures: int
    last_error: str | None
    last_error_at: datetime | None
    next_attempt_at: datetime | None
    last_delivered_at: datetime | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Webhook:
        return cls(
            id=uuid.UUID(data["id"]),
            url=data["url"],
            events=tuple(data["events"]) if data["events"] is not None else None,
            created_at=datetime.fromisoformat(data["createdAt"]),
            acked_cursor=data["ackedCursor"],
            pending_count=data["pendingCount"],
            failures=data["failures"],
            last_error=data["lastError"],
            last_error_at=_time(data["lastErrorAt"]),
            next_attempt_at=_time(data["nextAttemptAt"]),
            last_delivered_at=_time(data["lastDeliveredAt"]),
        )
