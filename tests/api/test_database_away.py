"""The database goes away behind a real TCP proxy: every request, including one that had
already authenticated, is answered at once (within MEMQL_POOL_TIMEOUT_SECONDS) with HTTP 503
and `extensions.code: SERVICE_UNAVAILABLE`, on /graphql, websockets and /mcp; none waits for
the pool's old 30 s nor ends as INTERNAL_SERVER_ERROR."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets

from memql.settings import Settings
from memql.testing import Tenant, serving
from tests import policies
from tests.operations import LIST, RECALL, SAVE
from tests.proxy import Proxy
from tests.ws import WsSession

POOL_WAIT = 1.0
# the pool's wait plus room for a loaded machine: far below the 30 s a request used to wait
PROMPT = POOL_WAIT + 8
MCP_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
async def away(database_url, embedder) -> AsyncIterator[tuple[str, Proxy]]:
    """A server whose database sits behind a proxy the test can cut."""
    proxy = Proxy(database_url)
    url = await proxy.start()
    settings = Settings(
        database_url=url,
        pool_min_size=1,
        pool_max_size=2,
        pool_timeout_seconds=POOL_WAIT,
        access_policy="tests.policies:by_user",
    )
    try:
        async with serving(settings, embedder) as server:
            yield server, proxy
    finally:
        await proxy.stop()


def headers(tenant: Tenant, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.key}", "X-User-Id": user}


async def post(http: httpx.AsyncClient, hdrs: dict[str, str], query: str, variables=None):
    started = time.monotonic()
    response = await http.post(
        "/graphql", json={"query": query, "variables": variables or {}}, headers=hdrs
    )
    return response, time.monotonic() - started


def unavailable(response: httpx.Response) -> bool:
    body: dict[str, Any] = response.json()
    codes = [e["extensions"]["code"] for e in body.get("errors") or []]
    return response.status_code == 503 and codes == ["SERVICE_UNAVAILABLE"] * len(codes) != []


@pytest.mark.parametrize(
    ("query", "variables"),
    [
        pytest.param(SAVE, {"input": {"content": "Cut mid-flight.", "kind": "TOPICAL"}}, id="save"),
        pytest.param(LIST, None, id="list"),
        pytest.param(RECALL, {"query": "anything"}, id="recall"),
    ],
)
async def test_a_request_that_authenticated_before_the_database_went_away_gets_a_prompt_503(
    away, tenant, query, variables
):
    server, proxy = away
    user = f"cut-{time.monotonic_ns()}"
    async with httpx.AsyncClient(base_url=server, timeout=60) as http:
        assert (await post(http, headers(tenant, user), LIST))[0].status_code == 200
        # the credentials resolve, then the database goes away before the work starts
        policies.AFTER_AUTHENTICATION[user] = proxy.stop
        response, took = await post(http, headers(tenant, user), query, variables)
        assert user not in policies.AFTER_AUTHENTICATION, "the cut did not happen"
        assert unavailable(response), response.text
        assert took < PROMPT
        # and every later request, which cannot even authenticate now
        for _ in range(2):
            response, took = await post(http, headers(tenant, user), query, variables)
            assert unavailable(response), response.text
            assert took < PROMPT


async def test_websocket_operations_and_mcp_get_service_unavailable_while_the_database_is_away(
    away, tenant
):
    server, proxy = away
    async with (
        httpx.AsyncClient(base_url=server, timeout=60) as http,
        WsSession(server, headers(tenant, "ws-user"), "graphql-transport-ws") as ws,
    ):
        assert (await ws.run(LIST))["data"]["memories"]["edges"] == []
        await proxy.stop()
        for _ in range(2):
            started = time.monotonic()
            result = await ws.run(SAVE, {"input": {"content": "Lost?", "kind": "TOPICAL"}})
            assert [e["extensions"]["code"] for e in result["errors"]] == ["SERVICE_UNAVAILABLE"]
            assert time.monotonic() - started < PROMPT
        started = time.monotonic()
        mcp = await http.post(
            "/mcp", json=MCP_LIST, headers={**MCP_HEADERS, **headers(tenant, "mcp-user")}
        )
        assert mcp.status_code == 503
        assert mcp.json()["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"
        assert time.monotonic() - started < PROMPT
    await asyncio.sleep(0)


async def test_a_websocket_opened_while_the_database_is_away_is_told_to_try_again_later(
    away, tenant
):
    """Not 4403 Forbidden (which graphql-transport-ws clients take as final: the bundled client
    raises Unauthenticated, graphql-ws gives up), but 1013 Try Again Later; the legacy protocol's
    connection_error carries SERVICE_UNAVAILABLE."""
    server, proxy = away
    await proxy.stop()
    url = server.replace("http://", "ws://") + "/graphql"
    init = json.dumps({"type": "connection_init", "payload": headers(tenant, "ws-late")})
    started = time.monotonic()
    async with websockets.connect(
        url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")]
    ) as ws:
        await ws.send(init)
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), PROMPT)
    assert ws.close_code == 1013, (ws.close_code, ws.close_reason)
    assert time.monotonic() - started < PROMPT
    async with websockets.connect(url, subprotocols=[websockets.Subprotocol("graphql-ws")]) as ws:
        await ws.send(init)
        refusal = json.loads(await asyncio.wait_for(ws.recv(), PROMPT))
    assert refusal["type"] == "connection_error"
    assert refusal["payload"]["code"] == "SERVICE_UNAVAILABLE"
