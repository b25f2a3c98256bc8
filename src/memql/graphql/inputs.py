"""Strawberry input types, their fields generated from the records (`memql.requests`). Unknown
fields are rejected by GraphQL validation itself."""

from __future__ import annotations

import strawberry

from memql.graphql.arguments import fields_of, record_of
from memql.requests import MemoryDraft


@strawberry.input(description="A memory to save. Only `content` and `kind` are required.")
@fields_of(MemoryDraft)
class SaveMemoryInput:
    def to_domain(self) -> MemoryDraft:
        return record_of(MemoryDraft, self)
