"""The MCP endpoint through the official MCP client over real HTTP, against the running server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from memql.embeddings.local import LocalEmbedder
from memql.settings import Settings
from memql.testing import Tenant, serving
from tests.operations import LIST, RECALL, SAVE, contents

READ_TOOLS = ["recall_memory", "list_memories"]
ALL_TOOLS = [*READ_TOOLS, "save_memory", "supersede_memory", "forget_memory"]


@asynccontextmanager
async def mcp_session(
    base_url: str, headers: Mapping[str, str], *, modern: bool = False
) -> AsyncIterator[ClientSession]:
    """The official MCP client, over streamable HTTP, with the given credentials; `modern`
    speaks the 2026-07-28 protocol (`server/discover`, no handshake) instead of `initialize`."""
    async with (
        httpx2.AsyncClient(headers=dict(headers), timeout=60) as http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        if modern:
            await session.discover()
        else:
            await session.initialize()
        yield session


def credentials(tenant: Tenant, user: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.key}", "X-User-Id": user}


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured result."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.structured_content
    body: dict[str, Any] = result.structured_content
    # clients that read only text get the same JSON
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text) == body
    return body


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; return the error code it reports."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    code: str = result.structured_content["error"]["code"]
    return code


@pytest.fixture(scope="module")
async def granted_server(database_url: str, embedder: LocalEmbedder) -> AsyncIterator[str]:
    """The app with an access policy that grants what the caller's user id names
    (`grant:user=read,project=none`; see tests/policies.py)."""
    settings = Settings(database_url=database_url, access_policy="tests.policies:by_user")
    async with serving(settings, embedder) as url:
        yield url


def granted(tenant: Tenant, grant: str) -> dict[str, str]:
    return credentials(tenant, user=f"grant:{grant}")


async def written(db: Any, tenant: Tenant) -> tuple[int, int]:
    """How many memory rows and event rows the tenant's project holds."""
    cur = await db.execute(
        "select (select count(*) from memories where project_id = %s),"
        " (select count(*) from memory_events where project_id = %s)",
        (tenant.project_id, tenant.project_id),
    )
    row = await cur.fetchone()
    return int(row[0]), int(row[1])


# --- what an agent is offered --------------------------------------------------------------


async def test_the_agent_key_is_offered_all_five_tools_and_the_discipline_prompt(server, tenant):
    async with mcp_session(server, credentials(tenant)) as session:
        tools = (await session.list_tools()).tools
        prompts = (await session.list_prompts()).prompts
    assert [t.name for t in tools] == ALL_TOOLS
    for tool in tools:
        assert tool.description
        assert tool.input_schema["additionalProperties"] is False
    assert [p.name for p in prompts] == ["memory_discipline"]


@pytest.mark.parametrize(
    ("grant", "tools", "prompts"),
    [
        ("user=read,project=read", READ_TOOLS, []),
        ("user=read-write,project=read", ALL_TOOLS, ["memory_discipline"]),
        ("user=none,project=none", [], []),
    ],
)
async def test_the_tool_list_follows_the_grant(granted_server, tenant, grant, tools, prompts):
    async with mcp_session(granted_server, granted(tenant, grant)) as session:
        assert [t.name for t in (await session.list_tools()).tools] == tools
        assert [p.name for p in (await session.list_prompts()).prompts] == prompts


async def test_the_2026_protocol_gets_the_same_tools_and_calls(granted_server, server, tenant):
    async with mcp_session(server, credentials(tenant), modern=True) as session:
        assert session.protocol_version == "2026-07-28"
        assert [t.name for t in (await session.list_tools()).tools] == ALL_TOOLS
        saved = await call(session, "save_memory", content="Prefers tea.", kind="topical")
        assert saved["outcome"] == "created"
        assert await refused(session, "save_memory", content="x", kind="topical", extra=1) == (
            "BAD_USER_INPUT"
        )
    read_only = granted(tenant, "user=read,project=read")
    async with mcp_session(granted_server, read_only, modern=True) as session:
        assert [t.name for t in (await session.list_tools()).tools] == READ_TOOLS
        assert await refused(session, "save_memory", content="x", kind="topical") == "FORBIDDEN"


# --- each tool -------------------------------------------------------------------------------


async def test_the_discipline_prompt_teaches_save_skip_keys_supersede_and_kinds(server, tenant):
    async with mcp_session(server, credentials(tenant)) as session:
        prompt = await session.get_prompt("memory_discipline")
    content = prompt.messages[0].content
    assert isinstance(content, types.TextContent)
    text = content.text
    for taught in (
        "durable",
        "reusable",
        "not a secret",
        "stable `key`",
        "supersede_memory",
        "`topical`",
        "`episodic`",
        "`operational`",
    ):
        assert taught in text, taught


# --- refusals ----------------------------------------------------------------------------------


async def test_a_write_tool_under_a_read_only_grant_is_refused_and_writes_nothing(
    granted_server, server, tenant, alice, db
):
    async with mcp_session(granted_server, granted(tenant, "user=read,project=read")) as session:
        assert await refused(session, "save_memory", content="Likes jazz.", kind="topical") == (
            "FORBIDDEN"
        )
        assert await refused(session, "forget_memory", key="anything") == "FORBIDDEN"
        # reading still works
        assert (await call(session, "list_memories"))["memories"] == []
    assert contents(await alice.ok(LIST)) == []
    assert await written(db, tenant) == (0, 0)


async def test_no_grant_can_call_no_tool(granted_server, tenant):
    async with mcp_session(granted_server, granted(tenant, "user=none,project=none")) as session:
        assert await refused(session, "recall_memory", query="anything") == "FORBIDDEN"
        assert await refused(session, "save_memory", content="x", kind="topical") == "FORBIDDEN"


async def test_the_service_checks_the_scope_of_an_offered_tool(granted_server, tenant, alice):
    """A grant that may write only project memories is offered save_memory, but a save into the
    read-only user scope is still refused by the service."""
    async with mcp_session(granted_server, granted(tenant, "user=read,project=read-write")) as s:
        assert await refused(s, "save_memory", content="Likes jazz.", kind="topical") == (
            "FORBIDDEN"
        )
        shared = await call(
            s,
            "save_memory",
            content="The team ships on Fridays.",
            kind="topical",
            scope="project",
        )
        assert shared["memory"]["scope"] == "project"
    assert contents(await alice.ok(LIST)) == ["The team ships on Fridays."]


async def test_unknown_arguments_and_bad_values_are_refused_and_change_nothing(
    server, tenant, alice, db
):
    async with mcp_session(server, credentials(tenant)) as session:
        result = await session.call_tool(
            "save_memory", {"content": "Likes jazz.", "kind": "topical", "colour": "red"}
        )
        assert result.is_error
        assert result.structured_content["error"]["code"] == "BAD_USER_INPUT"
        assert "unknown argument `colour`" in result.structured_content["error"]["message"]

        assert await refused(session, "save_memory", content="Likes jazz.", kind="fact") == (
            "BAD_USER_INPUT"
        )
        # the service's own rules (a key is a slug) come back with their code too
        assert (
            await refused(
                session, "save_memory", content="Likes jazz.", kind="topical", key="not a slug"
            )
            == "BAD_USER_INPUT"
        )
        assert await refused(session, "forget_memory", id="not-a-uuid") == "BAD_USER_INPUT"
        assert (
            await refused(session, "forget_memory", id="00000000-0000-0000-0000-000000000000")
            == "NOT_FOUND"
        )
    assert contents(await alice.ok(LIST)) == []
    assert await written(db, tenant) == (0, 0)


async def test_an_unknown_tool_is_a_protocol_error(server, tenant):
    async with mcp_session(server, credentials(tenant)) as session:
        with pytest.raises(MCPError, match="unknown tool 'erase_everything'"):
            await session.call_tool("erase_everything", {})


# --- one service behind both APIs --------------------------------------------------------------


async def test_a_memory_saved_through_mcp_is_recalled_through_graphql(server, tenant, alice):
    async with mcp_session(server, credentials(tenant)) as session:
        saved = await call(
            session, "save_memory", content="Training for the Berlin marathon.", kind="topical"
        )
    hits = (await alice.ok(RECALL, {"query": "which race is she running"}))["recall"]
    assert hits[0]["memory"]["id"] == saved["memory"]["id"]


async def test_a_memory_saved_through_graphql_is_recalled_through_mcp(server, tenant, alice):
    saved = await alice.ok(
        SAVE, {"input": {"content": "Works night shifts at the hospital.", "kind": "TOPICAL"}}
    )
    async with mcp_session(server, credentials(tenant)) as session:
        hits = await call(session, "recall_memory", query="when does she work")
    assert hits["memories"][0]["id"] == saved["saveMemory"]["memory"]["id"]


async def test_mcp_memories_stay_with_their_user(server, tenant, bob):
    async with mcp_session(server, credentials(tenant, "alice")) as session:
        await call(session, "save_memory", content="Plays the cello.", kind="topical")
    assert contents(await bob.ok(LIST)) == []
    async with mcp_session(server, credentials(tenant, "bob")) as session:
        assert (await call(session, "recall_memory", query="instrument"))["memories"] == []


async def test_mcp_writes_record_the_same_events_as_graphql_writes(server, tenant, db, http):
    async with mcp_session(server, credentials(tenant)) as session:
        first = await call(session, "save_memory", content="Prefers tea.", kind="topical")
        await call(session, "save_memory", content="Prefers tea.", kind="topical")
        new = await call(
            session,
            "supersede_memory",
            id=first["memory"]["id"],
            content="Prefers green tea.",
            kind="topical",
        )
        await call(session, "forget_memory", id=new["memory"]["id"])
    cur = await db.execute(
        "select type, memory_id::text, actor_id from memory_events where project_id = %s"
        " order by cursor",
        (tenant.project_id,),
    )
    assert await cur.fetchall() == [
        ("memory.created", first["memory"]["id"], "alice"),
        ("memory.absorbed", first["memory"]["id"], "alice"),
        ("memory.superseded", new["memory"]["id"], "alice"),
        ("memory.retired", new["memory"]["id"], "alice"),
    ]
    cur = await db.execute("select source from memories where id = %s", (first["memory"]["id"],))
    assert (await cur.fetchone())[0] == {"via": "mcp", "tool": "save_memory"}
    exposition = (await http.get("/metrics")).text
    assert 'memql_mcp_tool_calls_total{result="ok",tool="forget_memory"}' in exposition


# --- credentials ------------------------------------------------------------------------------


async def test_mcp_without_valid_credentials_is_401(http: httpx.AsyncClient, tenant):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    missing = await http.post("/mcp", json=initialize, headers=accept)
    assert missing.status_code == 401
    assert missing.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    wrong = await http.post(
        "/mcp",
        json=initialize,
        headers={**accept, "Authorization": "Bearer mq_nope", "X-User-Id": "alice"},
    )
    assert wrong.status_code == 401
    no_user = await http.post(
        "/mcp", json=initialize, headers={**accept, "Authorization": f"Bearer {tenant.key}"}
    )
    assert no_user.status_code == 401
    ok = await http.post("/mcp", json=initialize, headers={**accept, **credentials(tenant)})
    assert ok.status_code == 200


async def test_mcp_for_a_project_without_memory_is_404(http: httpx.AsyncClient, db, tenant):
    await db.execute(
        "update projects set memory_enabled = false where id = %s", (tenant.project_id,)
    )
    response = await http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream", **credentials(tenant)},
    )
    assert response.status_code == 404
    assert "memor" not in response.text.lower()


async def test_a_broken_access_policy_serves_no_tools(granted_server, tenant):
    async with httpx.AsyncClient(timeout=60) as http:
        response = await http.post(
            f"{granted_server}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={
                **credentials(tenant, user="raises"),
                "Accept": "application/json, text/event-stream",
            },
        )
    assert response.status_code == 500
    assert response.json()["errors"][0]["extensions"]["code"] == "INTERNAL_SERVER_ERROR"
