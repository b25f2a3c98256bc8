"""Request rates per credential and per project (MEMQL_RATE_PER_KEY, MEMQL_RATE_PER_PROJECT):
a caller over its rate gets HTTP 429 with `Retry-After` and `extensions.code:
TOO_MANY_REQUESTS` on /graphql and /mcp, and nothing runs; another key of the same project is
limited by the project's rate; another project is not limited at all."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from memql.access.credentials import display_prefix, generate_key, hash_key
from memql.db import tenants
from memql.db.pool import owner_connection
from memql.model import Consumer
from memql.settings import Settings
from memql.testing import Tenant, make_tenant, serving

VIEWER = {"query": "{ viewer { userId } }"}
MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
async def limited(database_url: str, embedder) -> AsyncIterator[httpx.AsyncClient]:
    # a rate so low that the bucket does not refill within the test: 3 requests, then none
    settings = Settings(
        database_url=database_url,
        rate_per_key=0.01,
        rate_per_project=0.02,
        rate_burst_seconds=300,
    )
    async with serving(settings, embedder) as url, httpx.AsyncClient(base_url=url) as http:
        yield http


async def another_key(database_url: str, tenant: Tenant) -> Tenant:
    key = generate_key()
    async with await owner_connection(database_url, autocommit=True) as conn:
        await tenants.insert_api_key(
            conn, tenant.project_id, display_prefix(key), hash_key(key), Consumer.AGENT
        )
    return Tenant(tenant.project_id, tenant.project_name, key)


def hdrs(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "X-User-Id": "alice"}


def refused(response: httpx.Response) -> bool:
    codes = [e["extensions"]["code"] for e in response.json()["errors"]]
    return (
        response.status_code == 429
        and int(response.headers["Retry-After"]) >= 1
        and codes == ["TOO_MANY_REQUESTS"] * len(codes) != []
    )


async def test_a_key_over_its_rate_gets_429_with_retry_after_on_graphql_and_mcp(
    limited: httpx.AsyncClient, tenant: Tenant, database_url: str
):
    for _ in range(3):
        ok = await limited.post("/graphql", json=VIEWER, headers=hdrs(tenant.key))
        assert ok.status_code == 200, ok.text
    over = await limited.post("/graphql", json=VIEWER, headers=hdrs(tenant.key))
    assert refused(over), (over.status_code, over.headers, over.text)
    mcp = await limited.post("/mcp", json=MCP_LIST, headers={**hdrs(tenant.key), **MCP_HEADERS})
    assert refused(mcp), (mcp.status_code, mcp.headers, mcp.text)
    # another project keeps its own rate
    other = await make_tenant(database_url)
    fine = await limited.post("/graphql", json=VIEWER, headers=hdrs(other.key))
    assert fine.status_code == 200, fine.text


async def test_a_projects_keys_share_the_projects_rate(
    limited: httpx.AsyncClient, database_url: str
):
    tenant = await make_tenant(database_url)
    second = await another_key(database_url, tenant)
    # the project's bucket holds 6: three from each key, then neither key gets more
    for key in (tenant.key, second.key):
        for _ in range(3):
            ok = await limited.post("/graphql", json=VIEWER, headers=hdrs(key))
            assert ok.status_code == 200, ok.text
    third = await another_key(database_url, tenant)
    over = await limited.post("/graphql", json=VIEWER, headers=hdrs(third.key))
    assert refused(over), over.text
