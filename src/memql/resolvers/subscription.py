"""Subscription resolvers: parse arguments, call the service, map to GraphQL types."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from memql.errors import BadInput
from memql.model import Principal
from memql.schema.asgi import connection_headers
from memql.schema.context import Info
from memql.schema.types import MemoryEvent, MemoryScope


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="Changes to the memories the caller may read, in cursor order, each once:"
        " its user scope and the project scope where the grant reads it (or only `scope`)."
        " With `since` (an event's cursor) it first replays what followed, then goes live."
    )
    async def memory_events(
        self, info: Info, scope: MemoryScope | None = None, since: str | None = None
    ) -> AsyncGenerator[MemoryEvent, None]:
        context = info.context
        principal = context.principal
        authenticator, params = context.authenticator, context.connection_params
        if authenticator is None or params is None:
            # the stream re-checks credentials from connection_init while it lives
            raise BadInput("subscribe over a websocket (graphql-transport-ws on /graphql)")

        async def recheck() -> Principal:
            return await authenticator.authenticate(connection_headers(params))

        events = context.service.memory_events(principal, scope=scope, since=since, recheck=recheck)
        async for event in events:
            yield MemoryEvent.from_domain(event)
