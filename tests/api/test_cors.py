"""Pages on other sites, in a real headless Chromium: an origin listed in MEMQL_CORS_ORIGINS
calls /graphql and /mcp with a browser JWT and subscribes over a websocket; any other origin is
refused both (the websocket check is the defence against cross-site websocket hijacking)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import jwt
import pytest
import websockets

from memql.settings import Settings, parse_origins
from memql.testing import GraphQLClient, Tenant, newest_cursor, serving
from tests.browser import OfflineContext, static_site
from tests.operations import SAVE

PAGE = "<!doctype html><title>another site</title><p>an app on another origin</p>"

FETCH = """
async ({url, token, body, accept}) => {
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: {"Authorization": `Bearer ${token}`, "Content-Type": "application/json",
                "Accept": accept},
      body: JSON.stringify(body),
    });
    return {status: response.status, body: await response.json()};
  } catch (error) {
    return {refused: String(error)};
  }
}
"""

# graphql-transport-ws by hand: resolves once the subscription is sent (or the socket closes)
SUBSCRIBE = """
({url, token, since}) => new Promise((resolve) => {
  window.events = [];
  const ws = new WebSocket(url, "graphql-transport-ws");
  ws.onopen = () => ws.send(JSON.stringify(
    {type: "connection_init", payload: {Authorization: `Bearer ${token}`}}));
  ws.onmessage = (message) => {
    const msg = JSON.parse(message.data);
    if (msg.type === "connection_ack") {
      ws.send(JSON.stringify({id: "1", type: "subscribe", payload: {
        query: "subscription($since: String) { memoryEvents(since: $since) { type memoryId } }",
        variables: {since},
      }}));
      resolve("subscribed");
    } else if (msg.type === "next") {
      window.events.push(msg.payload);
    }
  };
  ws.onclose = (event) => resolve(`closed ${event.code}`);
})
"""


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[str, str]]:
    """Two other origins on loopback: one listed in MEMQL_CORS_ORIGINS, one not."""
    with static_site(PAGE) as listed, static_site(PAGE) as unlisted:
        yield listed, unlisted


@pytest.fixture(scope="module")
async def cors_server(database_url, embedder, sites) -> AsyncIterator[str]:
    listed, _ = sites
    settings = Settings(database_url=database_url, cors_origins=parse_origins(listed))
    async with serving(settings, embedder) as url:
        yield url


def browser_token(tenant: Tenant, secret: str, sub: str = "dana") -> str:
    claims = {
        "iss": f"https://{tenant.project_name}.example",
        "aud": "memql",
        "sub": sub,
        "exp": int(time.time()) + 600,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


async def open_page(offline: OfflineContext, origin: str) -> Any:
    page = await offline.context.new_page()
    await page.goto(origin + "/app")
    return page


async def last_cursor(db, project_id) -> str:
    return str(await newest_cursor(db, project_id))


async def test_a_listed_origin_queries_graphql_with_a_browser_jwt(
    offline, sites, cors_server, jwt_tenant
):
    tenant, secret = jwt_tenant
    page = await open_page(offline, sites[0])
    result = await page.evaluate(
        FETCH,
        {
            "url": cors_server + "/graphql",
            "token": browser_token(tenant, secret),
            "body": {"query": "{ viewer { userId consumer } }"},
            "accept": "application/json",
        },
    )
    assert result == {
        "status": 200,
        "body": {"data": {"viewer": {"userId": "dana", "consumer": "CLIENT"}}},
    }


async def test_a_listed_origin_lists_mcp_tools_with_a_browser_jwt(
    offline, sites, cors_server, jwt_tenant
):
    tenant, secret = jwt_tenant
    page = await open_page(offline, sites[0])
    result = await page.evaluate(
        FETCH,
        {
            "url": cors_server + "/mcp",
            "token": browser_token(tenant, secret),
            "body": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            "accept": "application/json, text/event-stream",
        },
    )
    assert result["status"] == 200, result
    assert "recall_memory" in {tool["name"] for tool in result["body"]["result"]["tools"]}


async def test_a_listed_origin_subscribes_over_a_websocket(
    offline, sites, cors_server, jwt_tenant, db
):
    tenant, secret = jwt_tenant
    page = await open_page(offline, sites[0])
    ws_url = cors_server.replace("http://", "ws://") + "/graphql"
    since = await last_cursor(db, tenant.project_id)
    opened = await page.evaluate(
        SUBSCRIBE, {"url": ws_url, "token": browser_token(tenant, secret), "since": since}
    )
    assert opened == "subscribed"
    async with httpx.AsyncClient(base_url=cors_server, timeout=30) as http:
        dana = GraphQLClient(http, tenant.key, "dana")
        saved = await dana.ok(
            SAVE, {"input": {"content": "Reads the news at 7.", "kind": "TOPICAL"}}
        )
    await page.wait_for_function("window.events.length >= 1", timeout=20_000)
    events = await page.evaluate("window.events")
    assert events == [
        {
            "data": {
                "memoryEvents": {
                    "type": "memory.created",
                    "memoryId": saved["saveMemory"]["memory"]["id"],
                }
            }
        }
    ]


async def test_an_unlisted_origin_can_neither_fetch_nor_open_a_websocket(
    offline, sites, cors_server, jwt_tenant
):
    tenant, secret = jwt_tenant
    token = browser_token(tenant, secret)
    page = await open_page(offline, sites[1])
    for path in ("/graphql", "/mcp"):
        result = await page.evaluate(
            FETCH,
            {
                "url": cors_server + path,
                "token": token,
                "body": {"query": "{ viewer { userId } }"},
                "accept": "application/json, text/event-stream",
            },
        )
        assert "refused" in result, result
    ws_url = cors_server.replace("http://", "ws://") + "/graphql"
    closed = await page.evaluate(SUBSCRIBE, {"url": ws_url, "token": token, "since": None})
    assert closed == "closed 1006"  # the handshake was refused: no websocket ever opened


async def test_without_cors_origins_other_sites_are_refused(offline, sites, server, jwt_tenant):
    tenant, secret = jwt_tenant
    token = browser_token(tenant, secret)
    page = await open_page(offline, sites[0])
    result = await page.evaluate(
        FETCH,
        {
            "url": server + "/graphql",
            "token": token,
            "body": {"query": "{ viewer { userId } }"},
            "accept": "application/json",
        },
    )
    assert "refused" in result, result
    ws_url = server.replace("http://", "ws://") + "/graphql"
    closed = await page.evaluate(SUBSCRIBE, {"url": ws_url, "token": token, "since": None})
    assert closed == "closed 1006"


async def test_preflight_answers_name_the_origin_and_the_credential_headers(sites, cors_server):
    listed, unlisted = sites
    ask = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, x-user-id, content-type",
    }
    async with httpx.AsyncClient(base_url=cors_server) as http:
        for path in ("/graphql", "/mcp"):
            ok = await http.options(path, headers={"Origin": listed, **ask})
            assert ok.status_code == 200
            assert ok.headers["access-control-allow-origin"] == listed
            allowed = {
                h.strip().lower() for h in ok.headers["access-control-allow-headers"].split(",")
            }
            assert {"authorization", "x-user-id", "content-type"} <= allowed
            assert "access-control-allow-credentials" not in ok.headers
            refused = await http.options(path, headers={"Origin": unlisted, **ask})
            assert refused.status_code == 400
            assert refused.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
            assert "access-control-allow-origin" not in refused.headers
        # the health endpoints are not part of the cross-origin API
        health = await http.get("/healthz", headers={"Origin": listed})
        assert "access-control-allow-origin" not in health.headers


async def test_a_refused_preflight_or_handshake_is_logged_naming_memql_cors_origins(
    sites, cors_server, server, caplog
):
    _, unlisted = sites
    ask = {"Origin": unlisted, "Access-Control-Request-Method": "POST"}
    caplog.set_level(logging.WARNING)
    for base in (cors_server, server):  # an origin not listed; no origin listed at all
        caplog.clear()
        async with httpx.AsyncClient(base_url=base) as http:
            refused = await http.options("/graphql", headers=ask)
        assert refused.status_code == 400, refused.text  # without a list: was a bare 405
        assert refused.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
        assert any(
            "MEMQL_CORS_ORIGINS" in r.getMessage() and unlisted in r.getMessage()
            for r in caplog.records
        ), caplog.text

        caplog.clear()
        ws_url = base.replace("http://", "ws://") + "/graphql"
        with pytest.raises(websockets.InvalidStatus) as closed:
            async with websockets.connect(
                ws_url, origin=unlisted, subprotocols=["graphql-transport-ws"]
            ):
                pass
        assert closed.value.response.status_code == 403
        messages = [r.getMessage() for r in caplog.records]
        assert any("MEMQL_CORS_ORIGINS" in m and unlisted in m for m in messages), messages
        assert not any("allowed_origins" in m for m in messages), messages


async def test_a_websocket_without_origin_or_from_its_own_origin_still_connects(server):
    ws_url = server.replace("http://", "ws://") + "/graphql"
    for origin in (None, server):
        async with websockets.connect(
            ws_url, origin=origin, subprotocols=["graphql-transport-ws"]
        ) as ws:
            assert ws.response.status_code == 101  # the handshake was accepted
