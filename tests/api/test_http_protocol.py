"""GraphQL over HTTP: the newer application/graphql-response+json media type."""

from __future__ import annotations

GRAPHQL_RESPONSE = "application/graphql-response+json"


async def post(http, tenant, query: str, accept: str):
    return await http.post(
        "/graphql",
        json={"query": query},
        headers={"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice", "Accept": accept},
    )


async def test_a_client_accepting_graphql_response_json_gets_it(http, tenant):
    response = await post(
        http, tenant, "{ viewer { userId } }", f"{GRAPHQL_RESPONSE}, application/json"
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(GRAPHQL_RESPONSE)
    assert response.json() == {"data": {"viewer": {"userId": "alice"}}}


async def test_a_request_that_never_executes_is_400_without_data(http, tenant):
    for query in ("{ viewer {", "{ nonsense }"):
        response = await post(http, tenant, query, GRAPHQL_RESPONSE)
        assert response.status_code == 400
        body = response.json()
        assert "data" not in body
        assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_a_field_error_during_execution_stays_200_with_data(http, tenant):
    response = await post(
        http,
        tenant,
        '{ memoryHistory(id: "00000000-0000-4000-8000-000000000000") { id } }',
        GRAPHQL_RESPONSE,
    )
    assert response.status_code == 200
    body = response.json()
    assert body["data"] is None
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"


async def test_a_legacy_client_keeps_application_json(http, tenant):
    response = await post(http, tenant, "{ viewer {", "application/json")
    assert response.headers["content-type"].startswith("application/json")


async def test_the_graphql_http_npm_audit_passes_every_check(server, tenant, node, js_clients):
    """The npm `graphql-http` server audits (GraphQL over HTTP), run by node against the server."""
    import asyncio
    import json

    js = js_clients
    proc = await asyncio.create_subprocess_exec(
        node,
        str(js / "audit.mjs"),
        f"{server}/graphql",
        tenant.key,
        "auditor",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    result = json.loads(out)
    assert result["failures"] == []
    assert (result["ok"], result["warn"], result["error"]) == (61, 0, 0)
