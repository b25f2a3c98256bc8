"""Domain objects for tests that need no database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from memql.model import Kind, Memory, Scope


def memory(
    content: str,
    kind: Kind = Kind.TOPICAL,
    *,
    pinned: bool = False,
    category: str = "general",
) -> Memory:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Memory(
        id=uuid.uuid4(),
        project_id=uuid.uuid4(),
        scope=Scope.USER,
        owner_id="alice",
        kind=kind,
        content=content,
        key=None,
        category=category,
        pinned=pinned,
        source_thread_ids=(),
        source=None,
        created_by="alice",
        created_at=now,
        updated_at=now,
        expires_at=None,
        invalidated_at=None,
        invalidation_reason=None,
        supersedes=None,
        superseded_by=None,
        embedding_model="m",
    )
