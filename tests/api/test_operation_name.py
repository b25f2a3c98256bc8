"""A document with several operations runs the one `operationName` names; without a name it
is refused with BAD_USER_INPUT and nothing runs (the first operation used to run)."""

from __future__ import annotations

import httpx

from memql.testing import GraphQLClient
from tests.operations import LIST, contents
from tests.ws import WsSession

TWO = """
mutation First { saveMemory(input: {content: "Written by the first operation.", kind: TOPICAL}) {
  outcome } }
query Second { viewer { userId } }
"""


async def test_two_named_operations_without_operation_name_are_refused(
    alice: GraphQLClient, http: httpx.AsyncClient
):
    response = await http.post("/graphql", json={"query": TWO}, headers=alice.headers())
    body = response.json()
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", body
    assert "operationName" in body["errors"][0]["message"]
    assert not body.get("data")
    assert contents(await alice.ok(LIST)) == []


async def test_operation_name_picks_the_operation_to_run(alice: GraphQLClient, http):
    response = await http.post(
        "/graphql", json={"query": TWO, "operationName": "Second"}, headers=alice.headers()
    )
    assert response.json() == {"data": {"viewer": {"userId": "alice"}}}
    assert contents(await alice.ok(LIST)) == []


async def test_two_operations_without_a_name_are_refused_over_a_websocket(server, tenant, alice):
    init = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice"}
    async with WsSession(server, init, "graphql-transport-ws") as ws:
        result = await ws.run(TWO)
    assert result["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", result
    assert contents(await alice.ok(LIST)) == []
