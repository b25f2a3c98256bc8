"""Query resolvers: parse arguments, call the service, map to GraphQL types. No SQL here."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON
from strawberry.types.nodes import SelectedField

from memql.graphql.context import Info
from memql.graphql.types import (
    Grant,
    IdArg,
    Memory,
    MemoryConnection,
    MemoryContext,
    MemoryKind,
    MemoryOrder,
    MemoryScope,
    Node,
    RecallHit,
    Viewer,
    Webhook,
)
from memql.rules.validation import parse_id
from memql.settings import LIMITS

OccurredAfter = Annotated[
    datetime | None,
    strawberry.argument(description="Only memories whose event happened at or after this."),
]
OccurredBefore = Annotated[
    datetime | None,
    strawberry.argument(description="Only memories whose event happened before this."),
]


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
    async def memories(
        self,
        info: Info,
        scope: MemoryScope | None = None,
        kind: MemoryKind | None = None,
        category: str | None = None,
        pinned: bool | None = None,
        contains: str | None = None,
        include_invalidated: bool = False,
        first: Annotated[
            int | None,
            strawberry.argument(
                description=f"Page size from the start or `after` (default {LIMITS.list_default})."
            ),
        ] = None,
        after: str | None = None,
        occurred_after: OccurredAfter = None,
        occurred_before: OccurredBefore = None,
        last: Annotated[
            int | None,
            strawberry.argument(description="Page size from the end or `before`."),
        ] = None,
        before: str | None = None,
        order_by: Annotated[
            MemoryOrder | None,
            strawberry.argument(
                description="Default: newest created first. A cursor only works in the order"
                " it was made for."
            ),
        ] = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        source: Annotated[
            JSON | None,
            strawberry.argument(
                description='Only memories whose `source` contains this object, e.g. {"tool":'
                ' "slack"} (JSON containment: nested objects match by their keys, arrays by'
                " their elements)."
            ),
        ] = None,
    ) -> MemoryConnection:
        page = await info.context.service.list_memories(
            info.context.principal,
            scope=scope,
            kind=kind,
            category=category,
            pinned=pinned,
            contains=contains,
            include_invalidated=include_invalidated,
            created_after=created_after,
            created_before=created_before,
            updated_after=updated_after,
            updated_before=updated_before,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            source=cast(dict[str, Any] | None, source),
            order=order_by.to_domain() if order_by is not None else None,
            first=first,
            after=after,
            last=last,
            before=before,
            rows=_selects_rows(info),
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
        limit: int = LIMITS.recall_default,
        scope: MemoryScope | None = None,
        kinds: list[MemoryKind] | None = None,
        categories: list[str] | None = None,
        occurred_after: OccurredAfter = None,
        occurred_before: OccurredBefore = None,
        min_score: Annotated[
            float | None,
            strawberry.argument(
                description="Only hits scoring at least this (in [0, 1]); a query about nothing"
                " stored then returns nothing."
            ),
        ] = None,
    ) -> list[RecallHit]:
        hits = await info.context.service.recall(
            info.context.principal,
            query,
            limit=limit,
            scope=scope,
            kinds=kinds,
            categories=categories,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            min_score=min_score,
        )
        return [RecallHit.from_domain(h) for h in hits]

    @strawberry.field(
        description="A markdown block for a system prompt: pinned first, then the most relevant"
        " to `query` (or the newest), within `budget` characters."
    )
    async def memory_context(
        self, info: Info, query: str | None = None, budget: int = LIMITS.context_budget
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
        found = await info.context.service.webhooks.endpoints(info.context.principal)
        return [Webhook.from_domain(w) for w in found]


# what a connection can show without reading its page
_COUNT_ONLY = frozenset({"totalCount", "__typename"})


def _selects_rows(info: Info) -> bool:
    """Whether the selection shows the page (its edges or pageInfo): a selection of
    `totalCount` alone needs only the count, not a page of up to 200 memories to build and
    drop. Fragments count as showing it (read rather than guessed)."""
    for field in info.selected_fields:
        for selection in field.selections:
            if not isinstance(selection, SelectedField) or selection.name not in _COUNT_ONLY:
                return True
    return False
