"""The GraphQL endpoint: Strawberry's ASGI app with memql's per-request context."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from http import HTTPStatus
from typing import Any

from cross_web import HTTPException
from graphql import GraphQLError, OperationType, get_operation_ast, parse
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions import (
    GRAPHQL_TRANSPORT_WS_PROTOCOL,
    GRAPHQL_WS_PROTOCOL,
    MULTIPART_SUBSCRIPTION_PROTOCOL,
)
from strawberry.types import ExecutionResult

from memql import web
from memql.access.authenticate import Authenticator
from memql.errors import MemqlError, Unauthenticated
from memql.schema.context import Context
from memql.schema.rendering import encode_once
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


def is_subscription(query: str | None, operation_name: str | None) -> bool:
    """Whether the operation a request runs is a subscription."""
    # a keyword test first: the parse below is for the few requests that may subscribe
    return bool(
        query and "subscription" in query and _operation_is_subscription(query, operation_name)
    )


@lru_cache(maxsize=64)
def _operation_is_subscription(query: str, operation_name: str | None) -> bool:
    try:
        operation = get_operation_ast(parse(query), operation_name)
    except GraphQLError:
        return False  # reported by the execution with its own code
    return operation is not None and operation.operation is OperationType.SUBSCRIPTION


STREAM_NEEDED = (
    "a subscription is a stream: send it over a websocket on /graphql (graphql-transport-ws or"
    " graphql-ws), or over HTTP with `Accept: multipart/mixed;subscriptionSpec=1.0`"
)


class GraphQLApp(GraphQL[Context, None]):
    def __init__(
        self,
        schema: Any,
        resources: Callable[[], tuple[MemoryService, Authenticator]],
        **options: Any,
    ) -> None:
        # subscriptions over websockets, and over HTTP as multipart responses (Apollo Client)
        options.setdefault(
            "subscription_protocols",
            (GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL, MULTIPART_SUBSCRIPTION_PROTOCOL),
        )
        super().__init__(schema, **options)
        self._resources = resources

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
            )
        try:
            principal = await authenticator.authenticate(request.headers)
        except MemqlError as exc:
            if exc.http_status is not None:
                # not entitled (404) or credentials unresolvable (503): refuse the request
                raise HTTPException(exc.http_status, HTTPStatus(exc.http_status).phrase) from None
            # reported by the first field that needs a principal, with its code
            return Context(
                service, None, exc, authenticator=authenticator, request_headers=request.headers
            )
        return Context(
            service, principal, authenticator=authenticator, request_headers=request.headers
        )

    # One answer per HTTP request: a subscription that did not ask for a multipart stream gets
    # 400 with a code (executed as a query it would end in an internal error).
    async def execute_single(
        self,
        request: Request,
        request_adapter: Any,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: Any,
    ) -> ExecutionResult:
        if is_subscription(request_data.query, request_data.operation_name):
            sub_response.status_code = 400
            error = GraphQLError(STREAM_NEEDED, extensions={"code": "BAD_REQUEST"})
            return ExecutionResult(data=None, errors=[error])
        return await super().execute_single(
            request, request_adapter, sub_response, context, root_value, request_data
        )

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

    def encode_json(self, data: object) -> str | bytes:
        # a live event's data goes to many sockets: encoded once (schema/rendering.py)
        return encode_once(data) or super().encode_json(data)

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
