"""The GraphQL endpoint: Strawberry's ASGI app with memql's per-request context."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL

from memql.access.authenticate import Authenticator
from memql.errors import MemqlError
from memql.schema.context import Context
from memql.service import MemoryService


class GraphQLApp(GraphQL[Context, None]):
    def __init__(
        self,
        schema: Any,
        resources: Callable[[], tuple[MemoryService, Authenticator]],
        **options: Any,
    ) -> None:
        super().__init__(schema, **options)
        self._resources = resources

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        service, authenticator = self._resources()
        try:
            principal = await authenticator.authenticate(request.headers)
        except MemqlError as exc:
            # reported by the first field that needs a principal, with its code
            return Context(service, None, exc)
        return Context(service, principal)
