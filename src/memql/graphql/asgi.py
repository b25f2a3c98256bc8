"""The GraphQL endpoint: Strawberry's ASGI app with memql's per-request context."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from http import HTTPStatus
from typing import Any

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from graphql import GraphQLError, OperationDefinitionNode, OperationType, get_operation_ast
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.extensions import SchemaExtension
from strawberry.http import GraphQLRequestData
from strawberry.subscriptions import (
    GRAPHQL_TRANSPORT_WS_PROTOCOL,
    GRAPHQL_WS_PROTOCOL,
    MULTIPART_SUBSCRIPTION_PROTOCOL,
)
from strawberry.types import ExecutionResult
from strawberry.types.unset import UNSET

from memql.access.authenticate import Authenticator
from memql.access.identity import http_headers
from memql.db.session import request_deadline
from memql.errors import (
    BadInput,
    MemqlError,
    NotEntitled,
    RateLimited,
    ServiceUnavailable,
    Unauthenticated,
)
from memql.graphql import budgets as budget
from memql.graphql import persisted
from memql.graphql.context import Context
from memql.graphql.documents import Documents
from memql.graphql.rendering import encode_once, graphql_ws_sink, live_sink, transport_ws_sink
from memql.graphql.strawberry_internals import (
    AsyncWebSocketAdapter,
    BaseGraphQLTransportWSHandler,
    BaseGraphQLWSHandler,
    ConnectionInitMessage,
    Operation,
    core_schema,
)
from memql.http import request_body, web
from memql.http.errors import error_response
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


# RFC 6455's "Try Again Later"
TRY_AGAIN_LATER = 1013


class _RetryLaterSocket(AsyncWebSocketAdapter):
    """A websocket whose close for a refused `connection_init` (graphql-transport-ws closes
    every refusal with 4403 Forbidden, which clients take as final) becomes 1013 Try Again Later
    when the refusal was the database's absence, so clients reconnect instead of giving up."""

    def __init__(self, inner: AsyncWebSocketAdapter, context: Context) -> None:
        super().__init__(inner.view)
        self._inner = inner
        self._context = context

    def iter_json(self, *, ignore_parsing_errors: bool = False) -> AsyncGenerator[object, None]:
        return self._inner.iter_json(ignore_parsing_errors=ignore_parsing_errors)

    async def send_json(self, message: Mapping[str, object]) -> None:
        await self._inner.send_json(message)

    async def close(self, code: int, reason: str) -> None:
        if code == 4403 and self._context.unavailable is not None:
            code, reason = TRY_AGAIN_LATER, self._context.unavailable
        await self._inner.close(code=code, reason=reason)


class TransportWSHandler(BaseGraphQLTransportWSHandler[Context, None]):
    """graphql-transport-ws, with each operation's live events written by its stream straight
    to the socket (`rendering.LiveSink`), and a `connection_init` refused while the database is
    away closed with 1013 (`_RetryLaterSocket`)."""

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        socket, self.websocket = self.websocket, _RetryLaterSocket(self.websocket, self.context)
        try:
            await super().handle_connection_init(message)
        finally:
            self.websocket = socket

    async def run_operation(self, operation: Operation[Context, None]) -> None:
        # the operation's own task: the sink is seen by its resolver only
        ws = getattr(self.websocket, "ws", None)
        if isinstance(ws, WebSocket):
            live_sink.set(transport_ws_sink(ws.send_text, operation.id))
        await super().run_operation(operation)


class LegacyWSHandler(BaseGraphQLWSHandler[Context, None]):
    """graphql-ws (legacy), with live events written like `TransportWSHandler`'s."""

    async def handle_async_results(
        self,
        operation_id: str,
        query: str,
        operation_name: str | None,
        variables: dict[str, object] | None,
    ) -> None:
        ws = getattr(self.websocket, "ws", None)
        if isinstance(ws, WebSocket):
            live_sink.set(graphql_ws_sink(ws.send_text, operation_id))
        await super().handle_async_results(operation_id, query, operation_name, variables)


GRAPHQL_RESPONSE = "application/graphql-response+json"


def _refuse_over_rate(response_data: Any, sub_response: Response) -> None:
    """An answer whose credential or project is over its rate is a 429 with `Retry-After`
    (every field of it carries TOO_MANY_REQUESTS; nothing ran)."""
    answers = response_data if isinstance(response_data, list) else [response_data]
    waits = [
        int((e.get("extensions") or {}).get("retryAfter") or 1)
        for answer in answers
        if isinstance(answer, Mapping)
        for e in answer.get("errors") or []
        if (e.get("extensions") or {}).get("code") == RateLimited.code
    ]
    if waits:
        sub_response.status_code = HTTPStatus.TOO_MANY_REQUESTS
        sub_response.headers["Retry-After"] = str(max(waits))


def is_request_error(body: Mapping[str, Any]) -> bool:
    """Errors raised before execution (syntax, validation, variables) carry no `path`."""
    errors = body.get("errors") or []
    return body.get("data") is None and bool(errors) and all("path" not in e for e in errors)


def _refused(error: GraphQLError) -> ExecutionResult:
    return ExecutionResult(data=None, errors=[error])


def is_subscription(
    documents: Documents, query: str | None, operation_name: str | None, *, learn: bool
) -> bool:
    """Whether the operation a request runs is a subscription."""
    # a keyword test first: the parse below is for the few requests that may subscribe
    if not query or "subscription" not in query:
        return False
    operation = _operation(documents, query, operation_name, learn=learn)
    return operation is not None and operation.operation is OperationType.SUBSCRIPTION


def _operation(
    documents: Documents, query: str, operation_name: str | None, *, learn: bool
) -> OperationDefinitionNode | None:
    """The operation a request names, parsed through the bounded cache; None when the text
    is too large or does not parse (reported by the execution with its own code)."""
    try:
        entry = documents.parse(query, learn=learn)
    except (GraphQLError, BadInput):
        return None
    return get_operation_ast(entry.document, operation_name)


_NAME = re.compile(r"^[_A-Za-z][_0-9A-Za-z]*$")


def _check_request_shape(item: Mapping[str, Any], where: str) -> None:
    """An operation's members must be of their types (GraphQL over HTTP), refused with 400."""
    for name, kinds, what in (
        ("query", (str,), "a string"),
        ("operationName", (str,), "a string"),
        ("variables", (dict,), "an object"),
        ("extensions", (dict,), "an object"),
    ):
        value = item.get(name)
        if value is not None and not isinstance(value, kinds):
            raise HTTPException(400, f"{where}`{name}` must be {what} or null, if provided")
    given = item.get("operationName")
    if isinstance(given, str) and not _NAME.match(given):
        # never echoed: it may hold what JSON cannot encode (a lone surrogate)
        raise HTTPException(400, f"{where}`operationName` is not a GraphQL name")


STREAM_NEEDED = (
    "a subscription is a stream: send it over a websocket on /graphql (graphql-transport-ws or"
    " graphql-ws), or over HTTP with `Accept: multipart/mixed;subscriptionSpec=1.0`"
)


class GraphQLApp(GraphQL[Context, None]):
    """Strawberry's endpoint plus credentials per request, automatic persisted queries, and
    JSON refusals (`errors[].extensions.code`) where Strawberry answers in plain text."""

    graphql_transport_ws_handler_class = TransportWSHandler
    graphql_ws_handler_class = LegacyWSHandler

    def __init__(
        self,
        schema: Any,
        *,
        max_message_bytes: int,
        persisted_queries: int = 1000,
        request_timeout: float | None = None,
        **options: Any,
    ) -> None:
        # subscriptions over websockets, and over HTTP as multipart responses (Apollo Client)
        options.setdefault(
            "subscription_protocols",
            (GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL, MULTIPART_SUBSCRIPTION_PROTOCOL),
        )
        super().__init__(schema, **options)
        self._max_message_bytes = max_message_bytes
        self._request_timeout = request_timeout
        self._documents: Documents = schema.documents
        self._budgets = budget.Budgets(
            max_writes=schema.max_writes,
            max_aliases=schema.max_aliases,
            max_root_fields=budget.MAX_ROOT_FIELDS,
            max_cost=schema.max_cost,
        )
        self.cost_shares: budget.CostShares | None = schema.cost_shares
        self._limits = schema.limits
        self._types = core_schema(schema)

        # 0 turns automatic persisted queries off
        self._persisted = (
            persisted.PersistedQueries(persisted_queries) if persisted_queries else None
        )

    def should_render_graphql_ide(self, request: Any) -> bool:
        # a GET naming a persisted query by hash carries no `query` but is not a browser
        return "extensions" not in request.query_params and super().should_render_graphql_ide(
            request
        )

    async def run(self, request: Any, context: Any = UNSET, root_value: Any = UNSET) -> Any:
        try:
            return await super().run(request, context, root_value)
        except HTTPException as exc:
            # Strawberry's refusals (and ours in get_context) are plain text by default; a
            # body that is not readable JSON is the caller's bad input
            unreadable = isinstance(exc.__cause__, json.JSONDecodeError)
            return error_response(
                exc.status_code, exc.reason, code=BadInput.code if unreadable else None
            )

    def _validate_batch_request(self, request_data: list[Any], protocol: Any) -> None:
        super()._validate_batch_request(request_data, protocol)
        # Strawberry reads each entry with `.get` and passes its `query` on unchecked
        for index, item in enumerate(request_data):
            if not isinstance(item, Mapping):
                raise HTTPException(400, f"operation {index} of the batch is not a JSON object")
            _check_request_shape(item, f"operation {index} of the batch: ")

    async def parse_http_body(self, request: AsyncHTTPRequestAdapter) -> Any:
        data = await super().parse_http_body(request)
        if isinstance(data, GraphQLRequestData):
            _check_request_shape({"operationName": data.operation_name}, "")
        return data

    async def execute_operation(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        request_data: GraphQLRequestData | list[GraphQLRequestData],
        context: Context,
        root_value: None,
        sub_response: Response,
    ) -> Any:
        if not isinstance(request_data, list):
            return await super().execute_operation(
                request, request_adapter, request_data, context, root_value, sub_response
            )
        # a batch is one request: one set of budgets, one deadline, operations in order
        prepared = [self._prepare(data, context, sub_response, batch=True) for data in request_data]
        planned = [
            plan
            for data in prepared
            if isinstance(data, GraphQLRequestData)
            and (plan := self._plan(data, context)) is not None
        ]
        spent = budget.batch_cost(
            self._types, planned, self._limits, ceiling=self._budgets.max_cost or None
        )
        refusal = budget.over_budget(self._budgets, planned, spent)
        if refusal is not None:
            return [
                data if isinstance(data, ExecutionResult) else _refused(refusal)
                for data in prepared
            ]
        results: list[ExecutionResult] = []
        async with self._share(context, spent) as refused:
            if refused is not None:
                return [
                    data if isinstance(data, ExecutionResult) else _refused(refused)
                    for data in prepared
                ]
            # the request's database time (MEMQL_REQUEST_TIMEOUT_SECONDS) is the batch's: past
            # it nothing more starts, and no statement runs on
            with request_deadline(self._request_timeout):
                for data in prepared:
                    if isinstance(data, ExecutionResult):
                        results.append(data)
                        continue
                    results.append(
                        await self._run(
                            request, request_adapter, sub_response, context, root_value, data
                        )
                    )
        return results

    @asynccontextmanager
    async def _share(self, context: Context, cost: int) -> AsyncIterator[GraphQLError | None]:
        """A batch's turn within its project's share, for all its operations (each of them
        then runs without taking one of its own); yields the refusal when the turn did not
        come in time (nothing of the batch runs)."""
        if self.cost_shares is None or not cost or not context.authenticated:
            yield None
            return
        try:
            held = await self.cost_shares.acquire(context.principal.project_id, cost)
        except RateLimited as exc:
            yield GraphQLError(exc.message, extensions={"code": exc.code, **exc.extensions})
            return
        try:
            with budget.holding_share():
                yield None
        finally:
            self.cost_shares.release(context.principal.project_id, held)

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        prepared = self._prepare(request_data, context, sub_response, batch=False)
        if isinstance(prepared, ExecutionResult):
            return prepared
        with request_deadline(self._request_timeout):
            return await self._run(
                request, request_adapter, sub_response, context, root_value, prepared
            )

    def _prepare(
        self,
        request_data: GraphQLRequestData,
        context: Context,
        sub_response: Response,
        *,
        batch: bool,
    ) -> GraphQLRequestData | ExecutionResult:
        """The request with its persisted query filled in, or its refusal."""
        try:
            sha256 = persisted.requested_hash(request_data.extensions)
        except BadInput as exc:
            return _refused(GraphQLError(exc.message, extensions={"code": exc.code}))
        if sha256 is not None:
            if self._persisted is None:
                return _refused(persisted.not_supported())
            if request_data.query is None:
                # a project's own queries only: without credentials no hash is known
                known = (
                    self._persisted.get(context.principal.project_id, sha256)
                    if context.authenticated
                    else None
                )
                if known is None:
                    return _refused(persisted.not_found())
                request_data = replace(request_data, query=known)
            elif persisted.digest(request_data.query) != sha256:
                return _refused(
                    GraphQLError(
                        "`extensions.persistedQuery.sha256Hash` is not the SHA-256 of the query",
                        extensions={"code": BadInput.code},
                    )
                )
        # one answer per plain HTTP request: a subscription that did not ask for a multipart
        # stream gets 400 with a code (executed as a query it would end in an internal error);
        # checked on the query a hash stands for too
        if is_subscription(
            self._documents,
            request_data.query,
            request_data.operation_name,
            learn=context.authenticated,
        ):
            if not batch:
                sub_response.status_code = 400
            return _refused(GraphQLError(STREAM_NEEDED, extensions={"code": "BAD_REQUEST"}))
        return request_data

    def _plan(self, request_data: GraphQLRequestData, context: Context) -> budget.Planned | None:
        if not request_data.query:
            return None
        try:
            entry = self._documents.parse(request_data.query, learn=context.authenticated)
        except (GraphQLError, BadInput):
            return None  # refused when it runs, with its own code
        return budget.Planned(entry.document, request_data.operation_name, request_data.variables)

    async def _run(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        """One operation, within the deadline its caller set (`request_deadline`)."""
        result = await super().execute_single(
            request, request_adapter, sub_response, context, root_value, request_data
        )
        self._learn(request_data, context, result)
        return result

    def _learn(
        self, request_data: GraphQLRequestData, context: Context, result: ExecutionResult
    ) -> None:
        """Keep a persisted query sent with its hash: for the caller's project, once it parsed
        and validated, and only from a request with valid credentials."""
        if self._persisted is None or not request_data.query or not context.authenticated:
            return
        try:
            sha256 = persisted.requested_hash(request_data.extensions)
        except BadInput:
            return
        # only a query that parsed and validated is worth keeping
        valid = result.data is not None or any(e.path for e in result.errors or ())
        if sha256 is not None and valid:
            self._persisted.put(context.principal.project_id, sha256, request_data.query)

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
        # what the app's lifespan opened (runtime.open_memql), handed to every request
        service: MemoryService = request.state.service
        authenticator: Authenticator = request.state.authenticator
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
            credentials = http_headers(request.headers.raw)
            principal = await authenticator.authenticate(credentials)
        except NotEntitled:
            # a project without memory: 404, revealing nothing
            raise HTTPException(404, HTTPStatus(404).phrase) from None
        except MemqlError as exc:
            # reported by the first field that needs a principal, with its code (credentials
            # that cannot be resolved: SERVICE_UNAVAILABLE, and the answer is a 503)
            return Context(service, None, exc, authenticator=authenticator)
        return Context(service, principal, authenticator=authenticator, request_headers=credentials)

    # GraphQL over HTTP: a client that accepts application/graphql-response+json gets it, and
    # with it 400 (and no `data`) for a request that never reached execution
    async def get_sub_response(self, request: Request | WebSocket) -> Response:
        sub_response = await super().get_sub_response(request)
        sub_response.graphql_response_json = (  # type: ignore[attr-defined]
            GRAPHQL_RESPONSE in request.headers.get("accept", "")
        )
        return sub_response

    def create_response(self, response_data: Any, sub_response: Response) -> Response:
        _refuse_over_rate(response_data, sub_response)
        if isinstance(response_data, Mapping) and any(
            (e.get("extensions") or {}).get("code") == ServiceUnavailable.code
            for e in response_data.get("errors") or []
        ):
            # the database is away: the whole answer is a 503, to be retried
            sub_response.status_code = HTTPStatus.SERVICE_UNAVAILABLE
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
        # a live event's data goes to many sockets: encoded once (graphql/rendering.py)
        return encode_once(data) or super().encode_json(data)

    async def on_ws_connect(self, context: Context) -> Any:
        assert context.authenticator is not None  # every websocket context gets one
        try:
            principal = await context.authenticator.authenticate(
                connection_headers(context.connection_params)
            )
        except MemqlError as exc:
            if isinstance(exc, ServiceUnavailable | RateLimited):
                context.unavailable = exc.message
            raise ConnectionRejectionError({"code": exc.code, "message": exc.message}) from None
        context.identify(principal)
        return None
