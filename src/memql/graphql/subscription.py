"""Subscription resolvers: parse arguments, call the service, map to GraphQL types."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

import strawberry

from memql.errors import BadInput
from memql.graphql.asgi import connection_headers
from memql.graphql.context import Info
from memql.graphql.rendering import live_sink, render_key, rendered_data, shared_event
from memql.graphql.types import MemoryEvent, MemoryScope
from memql.realtime.recheck import Credentials, Recheck


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
        authenticator = context.authenticator
        # the stream re-checks the credentials it started with while it lives: a websocket's
        # connection_init payload, or the headers of a multipart HTTP request
        credentials: Credentials | None
        if context.connection_params is not None:
            credentials = connection_headers(context.connection_params)
        elif context.request_headers is not None:
            credentials = context.request_headers
        else:
            credentials = None
        if authenticator is None or credentials is None:
            raise BadInput("subscribe over a websocket or a multipart HTTP request on /graphql")

        recheck = Recheck(
            authenticator.authenticate_many,
            credentials,
            epoch=authenticator.credential_epoch,
            on_change=authenticator.cache.on_change,
        )
        events = context.service.memory_events(principal, scope=scope, since=since, recheck=recheck)
        # a websocket operation writes an event its selection was already executed on (for
        # another subscriber) straight to its socket; the rest take GraphQL's path
        sink = live_sink.get()
        key = render_key(info.operation, info.variable_values, context)
        async with aclosing(events):
            async for event in events:
                shared = shared_event(event)
                if sink is None or (data := rendered_data(shared, info.operation, key)) is None:
                    yield shared
                else:
                    await sink.send(data)
