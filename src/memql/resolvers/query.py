"""Query resolvers: parse arguments, call the service, map to GraphQL types. No SQL here."""

from __future__ import annotations

import strawberry

from memql.schema.context import Info, parse_id
from memql.schema.types import (
    Grant,
    IdArg,
    Memory,
    MemoryConnection,
    MemoryContext,
    MemoryKind,
    MemoryScope,
    RecallHit,
    Viewer,
    Webhook,
)


@strawberry.type
class Query:
    @strawberry.field(description="Who is asking and what they may do.")
    def viewer(self, info: Info) -> Viewer:
        p = info.context.principal
        return Viewer(
            user_id=p.user_id,
            project_id=strawberry.ID(str(p.project_id)),
            project_name=p.project_name,
            consumer=p.consumer,
            grant=Grant(user=p.grant.user, project=p.grant.project),
        )

    @strawberry.field(description="One memory version by id; null when it is not yours to see.")
    async def memory(self, info: Info, id: IdArg) -> Memory | None:
        found = await info.context.service.get(info.context.principal, parse_id(id))
        return Memory.from_domain(found) if found else None

    @strawberry.field(description="Memories, newest first. Live ones unless includeInvalidated.")
    async def memories(
        self,
        info: Info,
        scope: MemoryScope | None = None,
        kind: MemoryKind | None = None,
        category: str | None = None,
        pinned: bool | None = None,
        contains: str | None = None,
        include_invalidated: bool = False,
        first: int = 50,
        after: str | None = None,
    ) -> MemoryConnection:
        page = await info.context.service.list_memories(
            info.context.principal,
            scope=scope,
            kind=kind,
            category=category,
            pinned=pinned,
            contains=contains,
            include_invalidated=include_invalidated,
            first=first,
            after=after,
        )
        return MemoryConnection.from_domain(page)

    @strawberry.field(description="Every version of a memory, oldest first.")
    async def memory_history(self, info: Info, id: IdArg) -> list[Memory]:
        versions = await info.context.service.history(info.context.principal, parse_id(id))
        return [Memory.from_domain(m) for m in versions]

    @strawberry.field(
        description="Live memories ranked by meaning, words, recency and pinning; best first."
    )
    async def recall(
        self,
        info: Info,
        query: str,
        limit: int = 5,
        scope: MemoryScope | None = None,
        kinds: list[MemoryKind] | None = None,
        categories: list[str] | None = None,
    ) -> list[RecallHit]:
        hits = await info.context.service.recall(
            info.context.principal,
            query,
            limit=limit,
            scope=scope,
            kinds=kinds,
            categories=categories,
        )
        return [RecallHit.from_domain(h) for h in hits]

    @strawberry.field(
        description="A markdown block for a system prompt: pinned first, then the most relevant"
        " to `query` (or the newest), within `budget` characters."
    )
    async def memory_context(
        self, info: Info, query: str | None = None, budget: int = 8000
    ) -> MemoryContext:
        block = await info.context.service.context(
            info.context.principal, query=query, budget=budget
        )
        return MemoryContext(text=block.text, count=block.count, omitted=block.omitted)

    @strawberry.field(
        description="This project's webhook endpoints with their delivery state. Server"
        " credentials only."
    )
    async def webhooks(self, info: Info) -> list[Webhook]:
        found = await info.context.service.webhooks(info.context.principal)
        return [Webhook.from_domain(w) for w in found]
