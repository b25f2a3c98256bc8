"""Every operation on an open websocket is authorised against the credential's current state,
on both protocols: a key revoked with `memql keys revoke`, a project disabled with `memql
projects disable`, or a grant the policy withdrew stops the next operation on the socket (and a
new subscription with `since` replays nothing)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from memql.settings import Settings
from memql.testing import GraphQLClient, Tenant, newest_cursor, serving
from tests import policies
from tests.operations import SAVE
from tests.ws import MEMORY_EVENTS, WsSession

# the legacy graphql-ws protocol carries subscriptions only (queries and mutations are refused)
PROTOCOLS = ["graphql-transport-ws", "graphql-ws"]


@pytest.fixture(scope="module")
async def policy_server(database_url, embedder) -> AsyncIterator[str]:
    settings = Settings(database_url=database_url, access_policy="tests.policies:by_user")
    async with serving(settings, embedder) as url:
        yield url


async def memql(database_url: str, *args: str) -> str:
    """Run the `memql` command line against the test database; its stdout."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memql.cli",
        *args,
        env={**os.environ, "DATABASE_URL": database_url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def revoke_keys_of(database_url: str, tenant: Tenant) -> None:
    listing = await memql(database_url, "keys", "list", "--project", tenant.project_name)
    ids = [line.split()[0] for line in listing.splitlines() if line.strip()]
    assert ids, listing
    for key_id in ids:
        await memql(database_url, "keys", "revoke", key_id)


def init(tenant: Tenant, user: str) -> dict[str, Any]:
    return {"Authorization": f"Bearer {tenant.key}", "X-User-Id": user}


def save(content: str) -> dict[str, Any]:
    return {"input": {"content": content, "kind": "EPISODIC"}}


def code_of(result: dict[str, Any]) -> str:
    assert result.get("errors"), f"expected an error, got {result}"
    code: str = result["errors"][0]["extensions"]["code"]
    return code


async def memory_count(db, tenant: Tenant) -> int:
    cur = await db.execute(
        "select count(*) from memories where project_id = %s", (tenant.project_id,)
    )
    (count,) = await cur.fetchone()
    return int(count)


async def newest_since(db, project_id) -> str:
    return str(await newest_cursor(db, project_id))


async def assert_refused_without_replay(session: WsSession, since: str, expected_code: str) -> None:
    """A new subscription with `since` (events exist after it) ends with `expected_code`
    before delivering a single event."""
    result = await session.result(await session.start(MEMORY_EVENTS, {"since": since}))
    assert result.get("data") in (None, {}) or result["data"].get("memoryEvents") is None, result
    assert code_of(result) == expected_code


async def test_a_revoked_key_stops_mutations_and_queries_on_an_open_socket(
    server, database_url, tenant, db
):
    async with WsSession(server, init(tenant, "alice"), "graphql-transport-ws") as ws:
        created = await ws.run(SAVE, save("Booked the venue on 2026-09-01."))
        assert created["data"]["saveMemory"]["outcome"] == "CREATED"
        before = await memory_count(db, tenant)

        await revoke_keys_of(database_url, tenant)

        refused = await ws.run(SAVE, save("Booked the caterer on 2026-09-02."))
        assert code_of(refused) == "UNAUTHENTICATED"
        assert refused.get("data") is None
        assert code_of(await ws.run("{ viewer { userId } }")) == "UNAUTHENTICATED"
        assert code_of(await ws.run("{ memories { edges { node { id } } } }")) == "UNAUTHENTICATED"
    assert await memory_count(db, tenant) == before


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_revoked_key_cannot_start_a_subscription_that_replays(
    server, database_url, alice, tenant, db, protocol
):
    since = await newest_since(db, tenant.project_id)
    await alice.ok(SAVE, save("Ordered flowers on 2026-09-03."))
    async with WsSession(server, init(tenant, "alice"), protocol) as ws:
        await revoke_keys_of(database_url, tenant)
        await assert_refused_without_replay(ws, since, "UNAUTHENTICATED")


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_disabled_project_stops_the_next_operation_on_an_open_socket(
    server, database_url, alice, tenant, db, protocol
):
    since = await newest_since(db, tenant.project_id)
    await alice.ok(SAVE, save("Sent the invitations on 2026-09-04."))
    async with WsSession(server, init(tenant, "alice"), protocol) as ws:
        if not ws.legacy:
            assert (await ws.run("{ viewer { userId } }"))["data"]["viewer"]["userId"] == "alice"
        await memql(database_url, "projects", "disable", tenant.project_name)
        try:
            if not ws.legacy:
                before = await memory_count(db, tenant)
                assert code_of(await ws.run(SAVE, save("Paid the deposit."))) == "NOT_FOUND"
                assert await memory_count(db, tenant) == before
            await assert_refused_without_replay(ws, since, "NOT_FOUND")
        finally:
            await memql(database_url, "projects", "enable", tenant.project_name)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_grant_the_policy_withdrew_stops_the_next_operation_on_an_open_socket(
    policy_server, tenant, db, protocol
):
    user = f"withdrawn-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=policy_server, timeout=60) as http:
        since = await newest_since(db, tenant.project_id)
        await GraphQLClient(http, tenant.key, user).ok(SAVE, save("Chose the menu on 2026-09-05."))
    async with WsSession(policy_server, init(tenant, user), protocol) as ws:
        policies.WITHDRAWN.add(user)
        try:
            if not ws.legacy:
                before = await memory_count(db, tenant)
                assert code_of(await ws.run(SAVE, save("Chose the wine."))) == "FORBIDDEN"
                assert await memory_count(db, tenant) == before
            await assert_refused_without_replay(ws, since, "FORBIDDEN")
        finally:
            policies.WITHDRAWN.discard(user)
