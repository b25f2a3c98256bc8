"""One user, one spelling: the `X-User-Id` header (read as UTF-8), a JWT's `sub`, a websocket's
`connection_init` payload and MCP requests all name users in one canonical form (NFC; no
surrounding whitespace, control or format characters; refused, never repaired), and a
credential header sent twice is refused."""

from __future__ import annotations

import json
import time
import unicodedata
from typing import Any

import httpx
import jwt
import pytest
import websockets

from memql.testing import Tenant
from tests.operations import LIST, SAVE, contents
from tests.ws import WsSession

VIEWER = "{ viewer { userId } }"
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "identity-test", "version": "1"},
    },
}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


def token(secret: str, tenant: Tenant, sub: Any) -> str:
    claims = {
        "iss": f"https://{tenant.project_name}.example",
        "aud": "memql",
        "sub": sub,
        "exp": int(time.time()) + 600,
    }
    return jwt.encode(claims, secret, algorithm="HS256")


async def graphql(
    http: httpx.AsyncClient,
    headers: list[tuple[bytes, bytes]],
    query: str,
    variables: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """POST with headers given as raw bytes, exactly as they go on the wire."""
    response = await http.post(
        "/graphql", json={"query": query, "variables": variables or {}}, headers=headers
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def key_headers(tenant: Tenant, user: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"Authorization", f"Bearer {tenant.key}".encode()), (b"X-User-Id", user)]


def bearer(value: str) -> list[tuple[bytes, bytes]]:
    return [(b"Authorization", f"Bearer {value}".encode())]


def error_code(body: dict[str, Any]) -> str:
    assert body.get("errors"), f"expected an error, got {body}"
    code: str = body["errors"][0]["extensions"]["code"]
    return code


async def test_a_utf8_user_id_is_one_user_across_header_jwt_and_websocket(server, http, jwt_tenant):
    tenant, secret = jwt_tenant
    saved = await graphql(
        http,
        key_headers(tenant, "ålice".encode()),
        SAVE,
        {"input": {"content": "Ålice prefers tea.", "kind": "TOPICAL"}},
    )
    assert saved["data"]["saveMemory"]["outcome"] == "CREATED", saved
    viewer = await graphql(http, key_headers(tenant, "ålice".encode()), VIEWER)
    assert viewer["data"]["viewer"]["userId"] == "ålice"

    # the same user by JWT, precomposed and decomposed alike (NFC)
    for sub in ("ålice", unicodedata.normalize("NFD", "ålice")):
        listed = await graphql(http, bearer(token(secret, tenant, sub)), LIST)
        assert contents(listed["data"]) == ["Ålice prefers tea."], sub
    # and over a websocket
    init = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "ålice"}
    async with WsSession(server, init, "graphql-transport-ws") as ws:
        listed = await ws.run(LIST)
        assert contents(listed["data"]) == ["Ålice prefers tea."]
    # the latin-1 reading of those bytes is someone else, who sees nothing of hers
    mojibake = "ålice".encode().decode("latin-1")
    assert mojibake == "Ã¥lice"
    other = await graphql(http, bearer(token(secret, tenant, mojibake)), LIST)
    assert contents(other["data"]) == []


async def test_an_x_user_id_that_is_not_utf8_is_refused(http, tenant):
    body = await graphql(http, key_headers(tenant, b"\xe5lice"), VIEWER)
    assert error_code(body) == "UNAUTHENTICATED"
    assert "UTF-8" in body["errors"][0]["message"]


@pytest.mark.parametrize(
    "sub",
    [
        pytest.param("jay\n", id="trailing newline"),
        pytest.param(" jay ", id="surrounding spaces"),
        pytest.param("jay\t", id="trailing tab"),
        pytest.param("ja\x85y", id="C1 control"),
        pytest.param("ja\u200by", id="zero-width space"),
        pytest.param("ja\u2028y", id="line separator"),
        pytest.param("j" * 257, id="too long"),
    ],
)
async def test_a_user_id_in_no_canonical_form_is_refused_on_every_transport(
    server, http, jwt_tenant, sub
):
    tenant, secret = jwt_tenant
    body = await graphql(http, bearer(token(secret, tenant, sub)), VIEWER)
    assert error_code(body) == "UNAUTHENTICATED", sub

    init = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": sub}
    with pytest.raises(websockets.ConnectionClosed) as closed:
        async with WsSession(server, init, "graphql-transport-ws"):
            pass
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403

    if "\n" not in sub and "\t" not in sub and sub == sub.strip():
        # what HTTP can carry in a header (it drops surrounding spaces itself)
        body = await graphql(http, key_headers(tenant, sub.encode()), VIEWER)
        assert error_code(body) == "UNAUTHENTICATED", sub
        mcp = await http.post(
            "/mcp", json=MCP_INIT, headers=[*key_headers(tenant, sub.encode()), *_accept()]
        )
        assert mcp.status_code == 401, sub


def _accept() -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in MCP_ACCEPT.items()]


async def test_a_credential_header_sent_twice_is_refused(http, tenant, bob):
    await bob.ok(SAVE, {"input": {"content": "Bob's secret plan.", "kind": "TOPICAL"}})
    twice_user = [*key_headers(tenant, b"alice"), (b"X-User-Id", b"bob")]
    body = await graphql(http, twice_user, LIST)
    assert error_code(body) == "UNAUTHENTICATED"
    assert "X-User-Id" in body["errors"][0]["message"]
    twice_key = [*twice_user[:1], *key_headers(tenant, b"alice")]
    assert error_code(await graphql(http, twice_key, VIEWER)) == "UNAUTHENTICATED"
    mcp = await http.post("/mcp", json=MCP_INIT, headers=[*twice_user, *_accept()])
    assert mcp.status_code == 401


async def test_a_credential_given_twice_in_connection_init_is_refused(server, tenant):
    for init in (
        {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice", "x-user-id": "bob"},
        {
            "Authorization": f"Bearer {tenant.key}",
            "X-User-Id": "alice",
            "headers": {"X-User-Id": "bob"},
        },
    ):
        with pytest.raises(websockets.ConnectionClosed) as closed:
            async with WsSession(server, init, "graphql-transport-ws"):
                pass
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403, json.dumps(init)


async def test_the_python_client_sends_a_non_ascii_user_id_as_utf8(server, tenant):
    from memql.client import AsyncClient

    async with AsyncClient(server, api_key=tenant.key, user_id="ålice") as client:
        assert (await client.viewer()).user_id == "ålice"
