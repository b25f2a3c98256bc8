"""Pages on other sites (MEMQL_CORS_ORIGINS): CORS on the API paths, nothing elsewhere.

Credentials are bearer headers, never cookies, so a listed origin is allowed the headers that
carry them and no `Access-Control-Allow-Credentials`. Websocket handshakes are not covered by
CORS: `/graphql` checks their `Origin` against the same list (graphql/asgi.py).
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memql.http_errors import error_response

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


class _Cors(CORSMiddleware):
    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code == 200:
            return response
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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.cors is not None and scope["type"] == "http" and scope["path"] in API_PATHS:
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)
