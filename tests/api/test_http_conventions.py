"""What HTTP client libraries rely on: automatic persisted queries (Apollo's protocol), batched
operations when enabled, JSON error bodies with `errors[].extensions.code` on every refusal,
and a protectable `/metrics`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from memql.settings import Settings
from memql.testing import Tenant, free_port, serving

VIEWER = "query Viewer { viewer { userId } }"


def sha(query: str) -> str:
    return hashlib.sha256(query.encode()).hexdigest()


def apq(digest: str) -> dict:
    return {"persistedQuery": {"version": 1, "sha256Hash": digest}}


def headers(tenant: Tenant, user: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.key}", "X-User-Id": user}


def code(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/json"), response.text
    return str(response.json()["errors"][0]["extensions"]["code"])


async def test_a_persisted_query_misses_then_is_learned_then_runs_by_hash(http, tenant):
    query = "query Mine { viewer { userId projectName } }"
    by_hash = {"extensions": apq(sha(query))}
    miss = await http.post("/graphql", json=by_hash, headers=headers(tenant))
    assert miss.status_code == 200
    assert code(miss) == "PERSISTED_QUERY_NOT_FOUND"
    assert miss.json()["errors"][0]["message"] == "PersistedQueryNotFound"

    learn = await http.post("/graphql", json={"query": query, **by_hash}, headers=headers(tenant))
    assert learn.json()["data"]["viewer"]["userId"] == "alice"

    hit = await http.post("/graphql", json=by_hash, headers=headers(tenant, "bob"))
    assert hit.json() == {"data": {"viewer": {"userId": "bob", "projectName": tenant.project_name}}}
    # GET, as Apollo sends queries by hash when told to
    params = {"extensions": json.dumps(apq(sha(query)))}
    got = await http.get("/graphql", params=params, headers=headers(tenant))
    assert got.json()["data"]["viewer"]["userId"] == "alice"


async def test_a_persisted_query_over_get_is_learned_from_get_too(http, tenant):
    query = "query ByGet($n: Int) { memories(first: $n) { totalCount } }"
    params = {"extensions": json.dumps(apq(sha(query))), "variables": '{"n": 1}'}
    miss = await http.get("/graphql", params=params, headers=headers(tenant))
    assert code(miss) == "PERSISTED_QUERY_NOT_FOUND"
    learned = await http.get("/graphql", params={**params, "query": query}, headers=headers(tenant))
    assert learned.json() == {"data": {"memories": {"totalCount": 0}}}
    hit = await http.get("/graphql", params=params, headers=headers(tenant))
    assert hit.json() == {"data": {"memories": {"totalCount": 0}}}


async def test_a_hash_that_is_not_the_querys_is_bad_input_and_is_not_learned(http, tenant):
    query = "query Other { viewer { consumer } }"
    wrong = sha("something else")
    bad = await http.post(
        "/graphql", json={"query": query, "extensions": apq(wrong)}, headers=headers(tenant)
    )
    assert code(bad) == "BAD_USER_INPUT"
    assert "data" not in bad.json() or bad.json()["data"] is None
    still = await http.post("/graphql", json={"extensions": apq(wrong)}, headers=headers(tenant))
    assert code(still) == "PERSISTED_QUERY_NOT_FOUND"
    for malformed in (
        {"persistedQuery": {"version": 2, "sha256Hash": sha(query)}},
        {"persistedQuery": {"version": 1, "sha256Hash": "abc"}},
        {"persistedQuery": "yes"},
    ):
        response = await http.post(
            "/graphql", json={"query": query, "extensions": malformed}, headers=headers(tenant)
        )
        assert code(response) == "BAD_USER_INPUT"


async def test_an_invalid_query_is_not_learned_under_its_hash(http, tenant):
    query = "query Broken { viewer { nope } }"
    response = await http.post(
        "/graphql", json={"query": query, "extensions": apq(sha(query))}, headers=headers(tenant)
    )
    assert code(response) == "BAD_USER_INPUT"
    again = await http.post(
        "/graphql", json={"extensions": apq(sha(query))}, headers=headers(tenant)
    )
    assert code(again) == "PERSISTED_QUERY_NOT_FOUND"


async def test_batches_are_refused_as_json_when_batching_is_off(http, tenant):
    batch = [{"query": VIEWER}, {"query": VIEWER}]
    response = await http.post("/graphql", json=batch, headers=headers(tenant))
    assert response.status_code == 400
    assert code(response) == "BAD_REQUEST"
    assert "batch" in response.json()["errors"][0]["message"].lower()


async def test_every_refusal_of_the_api_is_json_with_a_code(http, tenant, db):
    cases = [
        (await http.post("/graphql", json={}, headers=headers(tenant)), 400, "BAD_REQUEST"),
        (
            await http.post(
                "/graphql",
                content=b"{not json",
                headers={**headers(tenant), "Content-Type": "application/json"},
            ),
            400,
            "BAD_USER_INPUT",
        ),
        (
            await http.post(
                "/graphql",
                content=b"query { viewer { userId } }",
                headers={**headers(tenant), "Content-Type": "text/plain"},
            ),
            400,
            "BAD_REQUEST",
        ),
        (await http.put("/graphql", json={"query": VIEWER}), 405, "METHOD_NOT_ALLOWED"),
        (await http.get("/no-such-path"), 404, "NOT_FOUND"),
        (
            await http.get(
                "/graphql",
                params={"query": "mutation { eraseUserMemories { erased } }"},
                headers=headers(tenant),
            ),
            400,
            "BAD_REQUEST",
        ),
    ]
    for response, status, expected in cases:
        assert (response.status_code, code(response)) == (status, expected), response.text

    await db.execute(
        "update projects set memory_enabled = false where id = %s", (tenant.project_id,)
    )
    for path, body in (
        ("/graphql", {"query": VIEWER}),
        ("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ):
        gone = await http.post(
            path,
            json=body,
            headers={**headers(tenant), "Accept": "application/json, text/event-stream"},
        )
        assert (gone.status_code, code(gone)) == (404, "NOT_FOUND")
        assert "memor" not in gone.text.lower()


@pytest.fixture(scope="module")
async def configured(database_url, embedder) -> AsyncIterator[tuple[str, int]]:
    """A server with batching on (3 at most), APQ off, and /metrics on its own port behind a
    token."""
    metrics_port = free_port()
    settings = Settings(
        database_url=database_url,
        batch_max=3,
        persisted_queries=0,
        metrics_port=metrics_port,
        metrics_token="scrape-me",
    )
    async with serving(settings, embedder) as url:
        yield url, metrics_port


async def test_batching_when_enabled_runs_each_operation_up_to_the_bound(configured, tenant):
    url, _ = configured
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        batch = [
            {"query": VIEWER},
            {
                "query": "query($n: Int) { memories(first: $n) { totalCount } }",
                "variables": {"n": 1},
            },
            {"query": "{ nope }"},
        ]
        response = await http.post("/graphql", json=batch, headers=headers(tenant))
        assert response.status_code == 200
        first, second, third = response.json()
        assert first == {"data": {"viewer": {"userId": "alice"}}}
        assert second == {"data": {"memories": {"totalCount": 0}}}
        assert third["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        too_many = await http.post(
            "/graphql", json=[{"query": VIEWER}] * 4, headers=headers(tenant)
        )
        assert (too_many.status_code, code(too_many)) == (400, "BAD_REQUEST")


async def test_persisted_queries_turned_off_say_so(configured, tenant):
    url, _ = configured
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        response = await http.post(
            "/graphql", json={"extensions": apq(sha(VIEWER))}, headers=headers(tenant)
        )
        assert code(response) == "PERSISTED_QUERY_NOT_SUPPORTED"


async def test_metrics_on_their_own_port_behind_a_token(configured):
    url, metrics_port = configured
    async with httpx.AsyncClient(timeout=60) as http:
        on_api = await http.get(f"{url}/metrics")
        assert (on_api.status_code, code(on_api)) == (404, "NOT_FOUND")
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "scrape-me"}):
            refused = await http.get(metrics_url, headers=auth)
            assert (refused.status_code, code(refused)) == (401, "UNAUTHENTICATED")
            assert refused.headers["www-authenticate"].startswith("Bearer")
        ok = await http.get(metrics_url, headers={"Authorization": "Bearer scrape-me"})
        assert ok.status_code == 200
        assert "memql_graphql_operations_total" in ok.text
        elsewhere = await http.get(f"http://127.0.0.1:{metrics_port}/graphql")
        assert (elsewhere.status_code, code(elsewhere)) == (404, "NOT_FOUND")


async def test_metrics_stay_on_the_api_port_without_a_token_by_default(http):
    response = await http.get("/metrics")
    assert response.status_code == 200
    assert "memql_graphql_operations_total" in response.text
