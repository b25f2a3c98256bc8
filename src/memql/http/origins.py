"""Pages on other sites (MEMQL_CORS_ORIGINS): CORS on the API paths, nothing elsewhere.

Credentials are bearer headers, never cookies, so a listed origin is allowed the headers that
carry them and no `Access-Control-Allow-Credentials`. Websocket handshakes are not covered by
CORS: `/graphql` checks their `Origin` against the same list (graphql/asgi.py).

A refusal says how to allow what it refused: a preflight from an origin not listed (or while
none is) and a websocket handshake from one are logged naming MEMQL_CORS_ORIGINS. The
handshake is refused here, with Strawberry's own rule (no `Origin` or the same origin always
passes), so the log line is this one and not Strawberry's, which names its `allowed_origins`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send
from strawberry.http.websocket_origin import (
    is_same_origin,
    normalize_allowed_origins,
    normalize_origin,
)

from memql.http.errors import error_response

log = logging.getLogger(__name__)

API_PATHS = frozenset({"/graphql", "/mcp"})

# what a browser app sends: credentials, JSON bodies, and the MCP transport's own headers
ALLOW_HEADERS = (
    "Authorization",
    "X-User-Id",
    "Content-Type",
    "Mcp-Protocol-Version",
    "Mcp-Session-Id",
    "Last-Event-Id",
)
# what it may read back beyond the safelisted response headers
EXPOSE_HEADERS = ("Mcp-Session-Id", "Mcp-Protocol-Version", "Retry-After")


def _refused_preflight(origin: str | None, why: str) -> None:
    log.warning(
        "refused a CORS preflight from origin %r (%s): if pages there should call the API,"
        " add the origin to MEMQL_CORS_ORIGINS",
        origin,
        why,
    )


class _Cors(CORSMiddleware):
    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code == 200:
            return response
        _refused_preflight(request_headers.get("origin"), bytes(response.body).decode())
        # a refused preflight is JSON like every other refusal (errors[].extensions.code)
        kept = {
            k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")
        }
        return error_response(response.status_code, bytes(response.body).decode(), headers=kept)


class CrossOrigin:
    """Answers preflights and adds `Access-Control-*` headers for `origins` on the API paths."""

    def __init__(self, app: ASGIApp, origins: Collection[str]) -> None:
        self.app = app
        self.cors: ASGIApp | None = None
        if origins:
            self.cors = _Cors(
                app,
                allow_origins=list(origins),
                allow_methods=("GET", "POST", "DELETE"),
                allow_headers=ALLOW_HEADERS,
                expose_headers=EXPOSE_HEADERS,
                max_age=600,
            )

        self.origins = normalize_allowed_origins(origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        api = scope["type"] in ("http", "websocket") and scope["path"] in API_PATHS
        if api and scope["type"] == "websocket" and not self._handshake_allowed(scope):
            await send({"type": "websocket.close", "code": 1008})  # before accept: HTTP 403
            return
        if api and scope["type"] == "http":
            if self.cors is not None:
                await self.cors(scope, receive, send)
                return
            headers = Headers(scope=scope)
            if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
                # no origin is listed: a preflight gets a JSON refusal, not the route's 405
                _refused_preflight(headers.get("origin"), "MEMQL_CORS_ORIGINS is empty")
                await error_response(400, "Disallowed CORS origin")(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _handshake_allowed(self, scope: Scope) -> bool:
        """Strawberry's rule for a websocket's `Origin`, with memql's list and memql's log."""
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None:
            return True  # not a browser: it carries no ambient credentials
        host = headers.get("host")
        if headers.get("sec-fetch-site") == "same-origin" or is_same_origin(origin, host):
            return True
        if "*" in self.origins or normalize_origin(origin) in self.origins:
            return True
        log.warning(
            "refused a websocket handshake from origin %r to host %r: if pages there should"
            " subscribe, add the origin to MEMQL_CORS_ORIGINS",
            origin,
            host,
        )
        return False
