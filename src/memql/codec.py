"""Memory <-> JSON-safe dict, one format for everything that carries memories as text (the
broadcast between instances, export files)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from memql.model import Kind, Memory, Scope


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value is not None else None


def _uuid(value: str | None) -> uuid.UUID | None:
    return uuid.UUID(value) if value is not None else None


def memory_to_dict(m: Memory) -> dict[str, Any]:
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
        "occurred_at": _time(m.occurred_at),
    }


def memory_from_dict(d: dict[str, Any], *, project_id: uuid.UUID | None = None) -> Memory:
    """The inverse of `memory_to_dict`; `project_id` overrides the recorded project.
    Raises KeyError, ValueError or TypeError on a malformed record."""
    created_at, updated_at = parse_time(d["created_at"]), parse_time(d["updated_at"])
    if created_at is None or updated_at is None:
        raise ValueError("created_at and updated_at are required")
    return Memory(
        id=uuid.UUID(d["id"]),
        project_id=project_id or uuid.UUID(d["project_id"]),
        scope=Scope(d["scope"]),
        owner_id=str(d["owner_id"]),
        kind=Kind(d["kind"]),
        content=str(d["content"]),
        key=d.get("key"),
        category=str(d["category"]),
        pinned=bool(d["pinned"]),
        source_thread_ids=tuple(d["source_thread_ids"]),
        source=d.get("source"),
        created_by=str(d["created_by"]),
        created_at=created_at,
        updated_at=updated_at,
        expires_at=parse_time(d.get("expires_at")),
        invalidated_at=parse_time(d.get("invalidated_at")),
        invalidation_reason=d.get("invalidation_reason"),
        supersedes=_uuid(d.get("supersedes")),
        superseded_by=_uuid(d.get("superseded_by")),
        embedding_model=str(d["embedding_model"]),
        # absent from records exported before memories had an event time
        occurred_at=parse_time(d.get("occurred_at")),
    )
