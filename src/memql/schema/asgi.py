"""The GraphQL endpoint: Strawberry's ASGI app with memql's per-request context."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from http import HTTPStatus
from typing import Any

from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.extensions import SchemaExtension

from memql import request_body, web
from memql.access.authenticate import Authenticator
from memql.access.identity import http_headers
from memql.errors import MemqlError, NotEntitled, ServiceUnavailable, Unauthenticated
from memql.schema.context import Context
from memql.service import MemoryService


def connection_headers(params: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Credentials of a websocket's `connection_init` payload, keyed by header names, at the top
    level or in a nested `headers` object (every one, so a name given twice is seen twice)."""
    params = params or {}
    pairs = [(str(k), v) for k, v in params.items() if isinstance(v, str)]
    nested = params.get("headers")
    if isinstance(nested, Mapping):
        pairs += [(str(k), v) for k, v in nested.items() if isinstance(v, str)]
    return pairs


class AuthoriseEachOperation(SchemaExtension):
    """A websocket's operations (queries, mutations, each subscription start) run with a context
    of their own, authenticated again from the `connection_init` credentials when the operation
    starts: the connection's first answer never outlives a revoked key, a disabled project or a
    withdrawn grant. A context of its own per operation, because operations of one socket run
    concurrently. (HTTP requests are authenticated once each already.)"""

    async def on_execute(self) -> AsyncIterator[None]:
        context = self.execution_context.context
        if isinstance(context, Context) and context.websocket:
            credentials = connection_headers(context.connection_params)
            self.execution_context.context = await context.for_operation(credentials)
        yield


GRAPHQL_RESPONSE = "application/graphql-response+json"


def is_request_error(body: Mapping[str, Any]) -> bool:
    """Errors raised before execution (syntax, validation, variables) carry no `path`."""
    errors = body.get("errors") or []
    return body.get("data") is None and bool(errors) and all("path" not in e for e in errors)


class GraphQLApp(GraphQL[Context, None]):
    def __init__(
        self,
        schema: Any,
        resources: Callable[[], tuple[MemoryService, Authenticator]],
        *,
        max_message_bytes: int,
        **options: Any,
    ) -> None:
        super().__init__(schema, **options)
        self._resources = resources
        self._max_message_bytes = max_message_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        try:
            response = await self.run(Request(scope=scope, receive=receive))
        except HTTPException as exc:
            # refused before execution (unreadable body, not entitled...): still JSON, with a code
            response = request_body.error_response(exc.status_code, exc.reason)
        await response(scope, receive, send)

    # every JSON the endpoint reads (a POST body, GET variables, a websocket message) is
    # bounded: too large, too deep or unreadable numbers are malformed JSON, not a crash
    def decode_json(self, data: str | bytes) -> object:
        return request_body.decode(data, max_bytes=self._max_message_bytes)

    @property
    def graphql_ide_html(self) -> str:
        # GraphiQL from the package's own files, never a CDN
        return web.graphiql_html()

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        service, authenticator = self._resources()
        if isinstance(request, WebSocket):
            # credentials arrive later, in connection_init (see on_ws_connect)
            return Context(
                service,
                None,
                Unauthenticated("send credentials in connection_init"),
                authenticator=authenticator,
                websocket=True,
            )
        try:
            principal = await authenticator.authenticate(http_headers(request.headers.raw))
        except NotEntitled:
            # a project without memory: 404, revealing nothing
            raise HTTPException(404, HTTPStatus(404).phrase) from None
        except MemqlError as exc:
            # reported by the first field that needs a principal, with its code (credentials
            # that cannot be resolved: SERVICE_UNAVAILABLE, and the answer is a 503)
            return Context(service, None, exc, authenticator=authenticator)
        return Context(service, principal, authenticator=authenticator)

    # GraphQL over HTTP: a client that accepts application/graphql-response+json gets it, and
    # with it 400 (and no `data`) for a request that never reached execution
    async def get_sub_response(self, request: Request | WebSocket) -> Response:
        sub_response = await super().get_sub_response(request)
        sub_response.graphql_response_json = (  # type: ignore[attr-defined]
            GRAPHQL_RESPONSE in request.headers.get("accept", "")
        )
        return sub_response

    def create_response(self, response_data: Any, sub_response: Response) -> Response:
        if isinstance(response_data, Mapping) and any(
            (e.get("extensions") or {}).get("code") == ServiceUnavailable.code
            for e in response_data.get("errors") or []
        ):
            # the database is away: the whole answer is a 503, to be retried
            sub_response.status_code = ServiceUnavailable.http_status
        if not getattr(sub_response, "graphql_response_json", False) or not isinstance(
            response_data, Mapping
        ):
            return super().create_response(response_data, sub_response)
        request_error = is_request_error(response_data)
        if request_error:
            response_data = {k: v for k, v in response_data.items() if k != "data"}
        response = super().create_response(response_data, sub_response)
        response.headers["content-type"] = GRAPHQL_RESPONSE
        if request_error:
            response.status_code = 400
        return response

    async def on_ws_connect(self, context: Context) -> Any:
        _, authenticator = self._resources()
        try:
            principal = await authenticator.authenticate(
                connection_headers(context.connection_params)
            )
        except MemqlError as exc:
            raise ConnectionRejectionError({"code": exc.code, "message": exc.message}) from None
        context.identify(principal)
        return None
