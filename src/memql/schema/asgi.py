"""The GraphQL endpoint: Strawberry's ASGI app with memql's per-request context."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError

from memql import request_body
from memql.access.authenticate import Authenticator
from memql.errors import MemqlError, Unauthenticated
from memql.schema.context import Context
from memql.service import MemoryService


def connection_headers(params: Mapping[str, Any] | None) -> dict[str, str]:
    """Credentials of a websocket's `connection_init` payload, keyed by header names, at the top
    level or in a nested `headers` object."""
    params = params or {}
    merged: dict[str, Any] = {**params}
    nested = params.get("headers")
    if isinstance(nested, Mapping):
        merged.update(nested)
    return {str(k): v for k, v in merged.items() if isinstance(v, str)}


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
            )
        try:
            principal = await authenticator.authenticate(request.headers)
        except MemqlError as exc:
            if exc.http_status is not None:
                # not entitled (404) or credentials unresolvable (503): refuse the request
                raise HTTPException(exc.http_status, HTTPStatus(exc.http_status).phrase) from None
            # reported by the first field that needs a principal, with its code
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
