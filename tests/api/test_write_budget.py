"""One write budget per request (the batch limit, 100 memories), counted across every field,
alias and fragment of a mutation, over HTTP and websockets: over it, BAD_USER_INPUT and nothing
written (aliases used to multiply the batch limit)."""

from __future__ import annotations

from typing import Any

import httpx

from memql.testing import GraphQLClient, Tenant
from tests.ws import WsSession


def inputs(count: int, tag: str) -> list[dict[str, Any]]:
    return [{"content": f"{tag} reading number {i}.", "kind": "EPISODIC"} for i in range(count)]


def aliased_batches(count: int) -> str:
    variables = ", ".join(f"$b{i}: [SaveMemoryInput!]!" for i in range(count))
    fields = " ".join(f"b{i}: saveMemories(inputs: $b{i}) {{ outcome }}" for i in range(count))
    return f"mutation Batches({variables}) {{ {fields} }}"


async def memory_count(db, tenant: Tenant) -> int:
    cur = await db.execute(
        "select count(*) from memories where project_id = %s", (tenant.project_id,)
    )
    (count,) = await cur.fetchone()
    return int(count)


async def test_aliased_batches_over_the_budget_write_nothing(alice: GraphQLClient, tenant, db):
    variables = {f"b{i}": inputs(40, f"b{i}") for i in range(3)}
    body = await alice.raw(aliased_batches(3), variables)
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", body
    assert "120" in body["errors"][0]["message"]
    assert not body.get("data")
    assert await memory_count(db, tenant) == 0


async def test_a_batch_and_one_more_save_over_the_budget_write_nothing(
    alice: GraphQLClient, tenant, db
):
    literal = ", ".join(f'{{content: "Literal {i}.", kind: EPISODIC}}' for i in range(2))
    query = f"""
    mutation Over($batch: [SaveMemoryInput!]!) {{
      batch: saveMemories(inputs: $batch) {{ outcome }}
      ...More
    }}
    fragment More on Mutation {{
      literal: saveMemories(inputs: [{literal}]) {{ outcome }}
      ... on Mutation {{
        one: saveMemory(input: {{content: "One more.", kind: TOPICAL}}) {{ outcome }}
      }}
    }}
    """
    # 97 + 2 + 1 = 100 is within the budget; 98 + 2 + 1 is not
    body = await alice.raw(query, {"batch": inputs(98, "over")})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", body
    assert await memory_count(db, tenant) == 0
    data = await alice.ok(query, {"batch": inputs(97, "within")})
    assert len(data["batch"]) == 97 and len(data["literal"]) == 2
    assert await memory_count(db, tenant) == 100


async def test_a_variable_left_to_its_default_counts_its_default_inputs(
    alice: GraphQLClient, tenant, db
):
    # 30 aliases of one variable whose declared default holds 4 inputs: 120 memories
    default = ", ".join(f'{{content: "Default {i}.", kind: TOPICAL}}' for i in range(4))
    fields = " ".join(f"b{i}: saveMemories(inputs: $i) {{ outcome }}" for i in range(30))
    query = f"mutation Defaults($i: [SaveMemoryInput!]! = [{default}]) {{ {fields} }}"
    body = await alice.raw(query)
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", body
    assert "120" in body["errors"][0]["message"]
    assert await memory_count(db, tenant) == 0
    # the variable given counts what is given
    data = await alice.ok(query, {"i": inputs(3, "given")})
    assert len(data) == 30 and len(data["b0"]) == 3


async def test_the_budget_holds_over_a_websocket(server, tenant, db):
    init = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice"}
    variables = {f"b{i}": inputs(60, f"ws{i}") for i in range(2)}
    async with WsSession(server, init, "graphql-transport-ws") as ws:
        result = await ws.run(aliased_batches(2), variables)
    assert result["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", result
    assert await memory_count(db, tenant) == 0


async def test_queries_are_not_counted(http: httpx.AsyncClient, alice: GraphQLClient):
    fields = " ".join(f"v{i}: viewer {{ userId }}" for i in range(30))
    data = await alice.ok(f"{{ {fields} }}")
    assert len(data) == 30
