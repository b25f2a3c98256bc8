"""`/mcp`: the official MCP SDK's streamable HTTP transport over `MemoryService`.

Every HTTP request is authenticated like `/graphql` (API key + `X-User-Id`, or whatever the
authenticator accepts) before the SDK sees it: no credentials answer 401, a project without
memory 404. The principal travels in the ASGI scope to the handlers, which offer only the tools
its grant allows and check the grant again on every call.

The transport is stateless with JSON responses: any instance behind a load balancer can answer
any request, and no session outlives the request that authenticated it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Protocol, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from memql import metrics
from memql.access.identity import http_headers
from memql.errors import (
    BadInput,
    Forbidden,
    MemqlError,
    RateLimited,
    ServiceUnavailable,
    Unauthenticated,
    mask,
    renamed_for,
)
from memql.http.errors import error_response, retry_after, status_for
from memql.mcp import prompts
from memql.mcp.tools import BY_NAME, TOOLS, ToolSpec, tool_argument, tools_for
from memql.model import Principal
from memql.service import MemoryService

log = logging.getLogger(__name__)

PRINCIPAL_KEY = "memql.principal"

INSTRUCTIONS = (
    "Long-term memory for the user you act for. Recall before answering when earlier"
    f" conversations may matter; read the `{prompts.DISCIPLINE_NAME}` prompt for what to save."
)


class Authenticates(Protocol):
    async def authenticate(self, headers: Iterable[tuple[str, str]]) -> Principal: ...


SERVICE_KEY = "memql.service"

# built once: the SDK also asks for a tool's schema to check `Mcp-Param-*` headers
_SCHEMAS = {t.name: t.args.input_schema() for t in TOOLS}


def _principal(ctx: ServerRequestContext[Any, Any]) -> Principal:
    return _from_request(ctx, PRINCIPAL_KEY, Principal)


def _service(ctx: ServerRequestContext[Any, Any]) -> MemoryService:
    return _from_request(ctx, SERVICE_KEY, MemoryService)


T = TypeVar("T")


def _from_request(ctx: ServerRequestContext[Any, Any], key: str, kind: type[T]) -> T:
    """What `McpEndpoint.__call__` put in the request's scope for the handlers."""
    request = ctx.request
    value = request.scope.get(key) if request is not None else None
    if not isinstance(value, kind):
        # only reachable through a transport that bypasses McpEndpoint.__call__
        raise MCPError(code=types.INVALID_REQUEST, message="unauthenticated")
    return value


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=_SCHEMAS[spec.name],
        annotations=types.ToolAnnotations(
            read_only_hint=not spec.writes,
            destructive_hint=spec.name == "forget_memory",
            idempotent_hint=not spec.writes,
            open_world_hint=False,
        ),
    )


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        if error["type"] == "extra_forbidden":
            parts.append(f"unknown argument `{where}`")
        else:
            parts.append(f"`{where}`: {error['msg']}")
    return "; ".join(parts)


def _result(body: dict[str, Any], *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=is_error,
    )


def _error(exc: MemqlError) -> types.CallToolResult:
    """An expected failure, told to the agent so it can correct itself (same codes as GraphQL),
    naming fields and arguments as the tools spell them (`source_thread_ids`)."""
    message, extensions = renamed_for(exc, tool_argument)
    return _result({"error": {"code": exc.code, "message": message, **extensions}}, is_error=True)


class McpEndpoint:
    """The ASGI app for `/mcp`. Enter `running()` in the host app's lifespan."""

    def __init__(self) -> None:
        self._manager: StreamableHTTPSessionManager | None = None
        self.server: Server[Any] = Server(
            "memql",
            version=_version(),
            title="memql",
            instructions=INSTRUCTIONS,
            get_tool_input_schema=_SCHEMAS.get,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(
            app=self.server,
            stateless=True,
            json_response=True,
            # Host/Origin checks guard servers that trust whoever can reach them; every request
            # here carries a credential that a DNS-rebinding page cannot read, and the service
            # runs under whatever host name its deployment gives it.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if manager is None:
            await error_response(503, "starting")(scope, receive, send)
            return
        # what the app's lifespan opened (runtime.open_memql), handed to every request
        state = scope["state"]
        authenticator: Authenticates = state["authenticator"]
        try:
            principal = await authenticator.authenticate(http_headers(scope["headers"]))
        except MemqlError as exc:
            await _refusal(exc)(scope, receive, send)
            return
        await manager.handle_request(
            {**scope, PRINCIPAL_KEY: principal, SERVICE_KEY: state["service"]}, receive, send
        )

    # --- MCP handlers ---------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [_tool(t) for t in tools_for(_principal(ctx).grant)]
        # the list depends on the caller's grant: never shareable between callers
        return types.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        principal = _principal(ctx)
        spec = BY_NAME.get(params.name)
        if spec is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name!r}")
        result = await self._run(spec, principal, _service(ctx), params.arguments or {})
        metrics.MCP_TOOL_CALLS.labels(spec.name, "error" if result.is_error else "ok").inc()
        return result

    async def _run(
        self,
        spec: ToolSpec,
        principal: Principal,
        service: MemoryService,
        arguments: dict[str, Any],
    ) -> types.CallToolResult:
        # hiding a tool is not authorization: the grant is checked again here, and the service
        # checks the scope of every read and write
        if spec not in tools_for(principal.grant):
            return _error(Forbidden(f"this credential may not call {spec.name}"))
        try:
            args = spec.args.model_validate(arguments)
        except ValidationError as exc:
            return _error(BadInput(_validation_message(exc)))
        try:
            body = await spec.call(service, principal, args)
        except MemqlError as exc:
            return _error(exc)
        except Exception as exc:
            return _error(mask(exc, f"unexpected error in MCP tool {spec.name}", log=log))
        return _result(body)

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        listed = _writes(_principal(ctx))
        prompt = types.Prompt(
            name=prompts.DISCIPLINE_NAME,
            title=prompts.DISCIPLINE_TITLE,
            description=prompts.DISCIPLINE_DESCRIPTION,
        )
        return types.ListPromptsResult(
            prompts=[prompt] if listed else [], ttl_ms=0, cache_scope="private"
        )

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name != prompts.DISCIPLINE_NAME or not _writes(_principal(ctx)):
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown prompt {params.name!r}")
        return types.GetPromptResult(
            description=prompts.DISCIPLINE_DESCRIPTION,
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=prompts.DISCIPLINE)
                )
            ],
        )


def _refusal(exc: MemqlError) -> Response:
    """The HTTP answer to credentials that do not open /mcp."""
    status = status_for(exc)
    if status is not None:
        # not entitled (404): reveal nothing more; a database that is away (503): say so
        # too many requests (429): say which rate, and when to come back
        detail = exc.message if isinstance(exc, ServiceUnavailable | RateLimited) else None
        return error_response(status, detail, headers=retry_after(exc))
    if isinstance(exc, Unauthenticated):
        return error_response(
            401,
            exc.message,
            code=exc.code,
            headers={"WWW-Authenticate": 'Bearer realm="memql"'},
        )
    if isinstance(exc, Forbidden):
        return error_response(403, exc.message, code=exc.code)
    # a broken access policy: already logged with its error id; serve nothing
    return error_response(500, exc.message, code=exc.code, **exc.extensions)


def _writes(principal: Principal) -> bool:
    """The save/skip prompt is for agents that may save."""
    return any(t.writes for t in tools_for(principal.grant))


def _version() -> str:
    try:
        return version("memql")
    except PackageNotFoundError:
        return "0"
