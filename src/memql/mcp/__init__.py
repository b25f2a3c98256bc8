"""The MCP endpoint: agents manage their user's memory through the same service as GraphQL.

`memql.mcp.server` holds the endpoint (it loads the MCP SDK); `memql.mcp.tools` the tools and
their arguments, which need no SDK. `McpMount` is what the app routes `/mcp` to: it loads the
endpoint, and with it the SDK (1-2 s of imports), when the server starts, not when the app is
built.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

from memql.http.errors import error_response

if TYPE_CHECKING:
    from memql.mcp.server import McpEndpoint


class McpMount:
    """The ASGI app for `/mcp`. Enter `running()` in the host app's lifespan."""

    def __init__(self) -> None:
        self._endpoint: McpEndpoint | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        from memql.mcp.server import McpEndpoint

        endpoint = McpEndpoint()
        async with endpoint.running():
            self._endpoint = endpoint
            try:
                yield
            finally:
                self._endpoint = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._endpoint is None:
            await error_response(503, "starting")(scope, receive, send)
            return
        await self._endpoint(scope, receive, send)
