"""A document whose shape would hold validation (and with it every tenant's event loop) for
seconds is refused before validation, with or without credentials, on every transport: many
repeats of one field (validation compares each pair) and fragments spreading each other twice
over (an alias count that expands them doubles with each). Nothing runs; the answer is quick."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from memql.settings import Settings
from memql.testing import Tenant, serving
from tests.ws import WsSession

# 150 selections of one response key: validation took 0.2-0.5 s, 300 took 0.5-1.7 s
REPEATS = "{ " + "viewer { userId } " * 150 + "}"


# 2**22 aliased fields once expanded: Strawberry's alias count walked each (seconds)
def doubling(depth: int, on: str = "Query") -> str:
    chain = "".join(f"fragment F{i} on {on} {{ ...F{i + 1} ...F{i + 1} }} " for i in range(depth))
    return f"{on.lower()} {{ ...F0 }} {chain}fragment F{depth} on {on} {{ a: __typename }}"


DOUBLING = doubling(22)
ATTACKS = {
    "repeats": (REPEATS, "`viewer` is selected 150 times"),
    "fragments": (DOUBLING, "at most 2000 fields once every fragment is expanded"),
}
# each refusal well under what validation took before (measured on the shared 2-core machine)
QUICK = 5.0  # the chain took about 50 s before; a loaded machine answers in well under this


def creds(tenant: Tenant) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice"}


def apq(query: str) -> dict[str, Any]:
    digest = hashlib.sha256(query.encode()).hexdigest()
    return {"persistedQuery": {"version": 1, "sha256Hash": digest}}


def assert_refused(answer: dict[str, Any], words: str) -> None:
    assert answer.get("data") is None, answer
    [error] = answer["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT", error
    assert words in error["message"], error
    assert "refused before it is validated" in error["message"]


@pytest.fixture(scope="module")
async def batching(database_url, embedder) -> AsyncIterator[str]:
    async with serving(Settings(database_url=database_url, batch_max=20), embedder) as url:
        yield url


@pytest.fixture
async def client(batching) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=batching, timeout=30) as http:
        yield http


async def timed_post(client: httpx.AsyncClient, body: Any, headers: dict[str, str]) -> Any:
    started = time.perf_counter()
    response = await client.post("/graphql", json=body, headers=headers)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.text
    assert elapsed < QUICK, f"{elapsed:.2f} s"
    return response.json()


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("with_credentials", [False, True])
async def test_a_shape_validation_is_slow_on_is_refused_quickly_over_http(
    client, tenant, attack, with_credentials
):
    document, words = ATTACKS[attack]
    headers = creds(tenant) if with_credentials else {}
    assert_refused(await timed_post(client, {"query": document}, headers), words)
    # GraphQL over HTTP: a request that never reached execution is a 400
    response = await client.post(
        "/graphql",
        json={"query": document},
        headers={**headers, "Accept": "application/graphql-response+json"},
    )
    assert response.status_code == 400, response.text
    assert_refused(response.json(), words)


@pytest.mark.parametrize("attack", ATTACKS)
async def test_a_shape_validation_is_slow_on_is_refused_in_a_batch(client, tenant, attack):
    document, words = ATTACKS[attack]
    batch = [{"query": document}, {"query": "{ viewer { userId } }"}]
    first, second = await timed_post(client, batch, creds(tenant))
    assert_refused(first, words)
    assert second == {"data": {"viewer": {"userId": "alice"}}}


@pytest.mark.parametrize("attack", ATTACKS)
async def test_a_shape_validation_is_slow_on_is_refused_as_a_persisted_query_and_not_kept(
    client, tenant, attack
):
    document, words = ATTACKS[attack]
    body = {"query": document, "extensions": apq(document)}
    assert_refused(await timed_post(client, body, creds(tenant)), words)
    kept = await timed_post(client, {"extensions": apq(document)}, creds(tenant))
    assert kept["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND", kept


@pytest.mark.parametrize("protocol", ["graphql-transport-ws", "graphql-ws"])
async def test_a_shape_validation_is_slow_on_is_refused_quickly_over_websockets(
    batching, tenant, protocol
):
    attacks = list(ATTACKS.values())
    if protocol == "graphql-ws":
        # the legacy protocol runs subscriptions only
        attacks = [
            ("subscription { " + "memoryEvents { cursor } " * 150 + "}", "selected 150 times"),
            (doubling(22, "Subscription"), ATTACKS["fragments"][1]),
        ]
    async with WsSession(batching, creds(tenant), protocol) as ws:
        for document, words in attacks:
            started = time.perf_counter()
            answer = await ws.result(await ws.start(document))
            elapsed = time.perf_counter() - started
            assert_refused(answer, words)
            assert elapsed < QUICK, f"{elapsed:.2f} s"
        if protocol == "graphql-ws":
            return
        # the socket still serves
        assert await ws.result(await ws.start("{ viewer { userId } }")) == {
            "data": {"viewer": {"userId": "alice"}}
        }


async def test_graphiqls_introspection_and_ordinary_fragments_still_run(client, tenant):
    from graphql import get_introspection_query

    introspection = get_introspection_query(
        descriptions=True,
        specified_by_url=True,
        directive_is_repeatable=True,
        schema_description=True,
        input_value_deprecation=True,
    )
    answer = await timed_post(client, {"query": introspection}, {})
    assert answer["data"]["__schema"]["queryType"]["name"] == "Query", answer.get("errors")
    # within the bounds: 20 repeats of one key, fragments spreading each other a few levels
    for document in ("{ " + "viewer { userId } " * 20 + "}", doubling(4)):
        answer = await timed_post(client, {"query": document}, creds(tenant))
        assert "errors" not in answer, answer
