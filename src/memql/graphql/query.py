"""Query resolvers: parse arguments, call the service, map to GraphQL types. No SQL here."""

from __future__ import annotations

import strawberry
from strawberry.types.nodes import SelectedField

from memql.graphql.arguments import takes_records
from memql.graphql.context import Info
from memql.graphql.types import (
    Grant,
    IdArg,
    Memory,
    MemoryConnection,
    MemoryContext,
    Node,
    RecallHit,
    Viewer,
    Webhook,
)
from memql.requests import ContextQuery, MemoryFilter, PageRequest, RecallQuery
from memql.rules.validation import parse_id
from memql.settings import LIMITS


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

    @strawberry.field(
        description="The object with this id (a Memory version); null when it is not yours to see."
    )
    async def node(self, info: Info, id: IdArg) -> Node | None:
        found = await info.context.service.get(info.context.principal, parse_id(id))
        return Memory.from_domain(found) if found else None

    @strawberry.field(
        description="Memories, newest created first unless `orderBy` says otherwise; live ones"
        " unless includeInvalidated. Page forward with `first`/`after` (default"
        f" {LIMITS.list_default}, at most {LIMITS.list_max}) or backward with"
        " `last`/`before`. Time ranges include their `…After` instant and exclude their"
        " `…Before` one."
    )
    @takes_records(former_names=True)
    async def memories(self, info: Info, flt: MemoryFilter, page: PageRequest) -> MemoryConnection:
        found = await info.context.service.list_memories(
            info.context.principal, flt, page, rows=_selects_rows(info)
        )
        return MemoryConnection.from_domain(found)

    @strawberry.field(description="Every version of a memory, oldest first.")
    async def memory_history(self, info: Info, id: IdArg) -> list[Memory]:
        versions = await info.context.service.history(info.context.principal, parse_id(id))
        return [Memory.from_domain(m) for m in versions]

    @strawberry.field(
        description="Live memories ranked by meaning, words, recency and pinning; best first."
    )
    @takes_records()
    async def recall(self, info: Info, q: RecallQuery) -> list[RecallHit]:
        hits = await info.context.service.recall(info.context.principal, q)
        return [RecallHit.from_domain(h) for h in hits]

    @strawberry.field(
        description="A markdown block for a system prompt: pinned first, then the most relevant"
        " to `query` (or the newest), within `budget` characters."
    )
    @takes_records()
    async def memory_context(self, info: Info, q: ContextQuery) -> MemoryContext:
        block = await info.context.service.context(info.context.principal, q)
        return MemoryContext(text=block.text, count=block.count, omitted=block.omitted)

    @strawberry.field(
        description="This project's webhook endpoints with their delivery state. Server"
        " credentials only."
    )
    async def webhooks(self, info: Info) -> list[Webhook]:
        found = await info.context.service.webhooks.endpoints(info.context.principal)
        return [Webhook.from_domain(w) for w in found]


# what a connection can show without reading its page (graphql/budgets.py costs it so too)
COUNT_ONLY = frozenset({"totalCount", "__typename"})


def _selects_rows(info: Info) -> bool:
    """Whether the selection shows the page (its edges or pageInfo): a selection of
    `totalCount` alone needs only the count, not a page of up to 200 memories to build and
    drop. Fragments count as showing it (read rather than guessed)."""
    for field in info.selected_fields:
        for selection in field.selections:
            if not isinstance(selection, SelectedField) or selection.name not in COUNT_ONLY:
                return True
    return False
