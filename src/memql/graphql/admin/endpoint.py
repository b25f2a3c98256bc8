"""The admin API's endpoint (`/admin/graphql`, POST only): Strawberry's ASGI app behind an
operator's token.

The token is checked before Strawberry reads the request: a request without an accepted
operator token is a 401 `UNAUTHENTICATED` that parsed, validated and ran nothing (not even
introspection), and a project's API key or a browser token is refused by its shape without
being looked up. Everything else is as on `/graphql`: the app's security headers and body
limit, bounded JSON and documents, JSON refusals, masked unexpected errors, a 503 while the
database is away. No GraphiQL: it keeps the headers it sends in the browser's storage of the
API's origin, where every page of that origin could read an operator's token.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any, Protocol

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from psycopg_pool import AsyncConnectionPool
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLRequestData
from strawberry.types.unset import UNSET

from memql.access.operators import Operators
from memql.db import admin as db_admin
from memql.errors import BadInput, ServiceUnavailable, Unauthenticated
from memql.graphql.admin.schema import AdminContext, build_admin_schema
from memql.http import request_body
from memql.http.errors import error_response
from memql.service.admin import Admin
from memql.settings import Settings

ADMIN_PATH = "/admin/graphql"

log = logging.getLogger(__name__)


class _Running(Protocol):
    """What the endpoint takes of the running memql the app's lifespan hands to requests."""

    pool: AsyncConnectionPool


class AdminEndpoint(GraphQL[AdminContext, None]):
    """The admin API for the operators of `settings.admin_tokens`."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(
            build_admin_schema(
                introspection=settings.introspection,
                max_document_bytes=settings.max_document_bytes,
            ),
            graphql_ide=None,
            allow_queries_via_get=False,
            subscription_protocols=(),
        )
        self._operators = Operators(settings.admin_tokens)
        self._settings = settings

    async def run(self, request: Any, context: Any = UNSET, root_value: Any = UNSET) -> Any:
        if isinstance(request, WebSocket):  # never routed here; refused all the same
            await request.close(code=1008)
            return request
        try:
            operator = self._operators.identify(request.headers.getlist("authorization"))
        except Unauthenticated as exc:
            # the reason only: a token is never logged
            client = request.client.host if request.client else "?"
            log.warning("refused an admin API request from %s: %s", client, exc.message)
            return error_response(
                401,
                exc.message,
                code=exc.code,
                headers={"WWW-Authenticate": 'Bearer realm="memql admin"'},
            )
        memql: _Running = request.state.memql
        timeout = self._settings.request_timeout_seconds
        admin = Admin(
            lambda: db_admin.pooled(memql.pool, timeout_seconds=timeout),
            allow_private_webhooks=self._settings.webhooks_allow_private,
        )
        try:
            return await super().run(request, AdminContext(admin, operator), root_value)
        except HTTPException as exc:
            unreadable = isinstance(exc.__cause__, json.JSONDecodeError)
            return error_response(
                exc.status_code, exc.reason, code=BadInput.code if unreadable else None
            )

    async def parse_http_body(self, request: AsyncHTTPRequestAdapter) -> Any:
        data = await super().parse_http_body(request)
        if isinstance(data, GraphQLRequestData) and not isinstance(data.operation_name, str | None):
            raise HTTPException(400, "`operationName` must be a string or null, if provided")
        return data

    def decode_json(self, data: str | bytes) -> object:
        decoded = request_body.decode(data, max_bytes=self._settings.max_body_bytes)
        if not isinstance(decoded, dict):
            # one operation per request: no batches here
            raise request_body.UnreadableJson("the body is one JSON object: one operation")
        return decoded

    def create_response(self, response_data: Any, sub_response: Response) -> Response:
        if isinstance(response_data, dict) and any(
            (e.get("extensions") or {}).get("code") == ServiceUnavailable.code
            for e in response_data.get("errors") or []
        ):
            # the database is away: the whole answer is a 503, to be retried
            sub_response.status_code = HTTPStatus.SERVICE_UNAVAILABLE
        return super().create_response(response_data, sub_response)

    async def get_context(self, request: Request | WebSocket, response: Any) -> AdminContext:
        raise AssertionError("run() passes the context")  # pragma: no cover
