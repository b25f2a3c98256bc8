"""Strawberry input types. Unknown fields are rejected by GraphQL validation itself."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.scalars import JSON

from memql import model
from memql.graphql.types import MemoryKind, MemoryScope
from memql.settings import LIMITS


@strawberry.input(description="A memory to save. Only `content` and `kind` are required.")
class SaveMemoryInput:
    content: str = strawberry.field(description="The statement, 1..8192 characters once trimmed.")
    kind: MemoryKind = strawberry.field(
        description="TOPICAL: a stable fact or preference; EPISODIC: a dated one-off event;"
        " OPERATIONAL: a procedure to follow."
    )
    scope: MemoryScope | None = strawberry.field(
        default=None, description="USER (default) or PROJECT (shared across the project)."
    )
    key: str | None = strawberry.field(
        default=None,
        description="Stable slug; saving with a key that is live supersedes that memory.",
    )
    category: str | None = strawberry.field(default=None, description="Defaults to `general`.")
    pinned: bool = False
    source_thread_ids: list[str] = strawberry.field(
        default_factory=list,
        description=f"Provenance: up to {LIMITS.source_thread_ids} thread ids.",
    )
    source: JSON | None = strawberry.field(
        default=None, description="Provenance object (tool, agent, message)."
    )
    expires_at: datetime | None = strawberry.field(
        default=None, description="After this instant the memory behaves as retired."
    )
    occurred_at: datetime | None = strawberry.field(
        default=None,
        description="When the event happened (for EPISODIC memories); shown in the context"
        " block. Without a zone it is taken as UTC.",
    )

    def to_domain(self) -> model.NewMemory:
        """Each field of this input is the field of `NewMemory` of the same name (lists as
        tuples)."""
        values: dict[str, Any] = {}
        for name in model.NEW_MEMORY_FIELDS:
            value = getattr(self, name)
            values[name] = tuple(value) if isinstance(value, list) else value
        return model.NewMemory(**values)
