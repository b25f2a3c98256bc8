"""Cached credentials: a revocation or a withdrawn entitlement takes effect on the next request of
every instance, and nothing is served from the cache while it cannot hear about changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from memql.access.cache import CredentialCache, listening
from memql.settings import Settings
from memql.testing import GraphQLClient, serving
from tests.api.test_errors import count_rows
from tests.operations import LIST, SAVE
from tests.proxy import Proxy

VIEWER = "{ viewer { userId } }"
NEW = {"content": "Prefers tea over coffee", "kind": "TOPICAL"}


@pytest.fixture
async def second(database_url, embedder) -> AsyncIterator[httpx.AsyncClient]:
    """A second server instance on the same database, with its own credential cache."""
    async with (
        serving(Settings(database_url=database_url), embedder) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        yield http


async def test_a_revoked_key_fails_on_the_next_request_of_another_instance(
    http, second, tenant, db
):
    first_alice = GraphQLClient(http, tenant.key, "alice")
    second_alice = GraphQLClient(second, tenant.key, "alice")
    # both instances have resolved (and kept) the key
    for client in (first_alice, second_alice):
        await client.ok(LIST)
        await client.ok(VIEWER)
    await db.execute(
        "update api_keys set revoked_at = now() where project_id = %s", (tenant.project_id,)
    )
    assert await second_alice.error(LIST) == "UNAUTHENTICATED"
    assert await second_alice.error(SAVE, {"input": NEW}) == "UNAUTHENTICATED"
    assert await second_alice.error(VIEWER) == "UNAUTHENTICATED"
    assert await first_alice.error(VIEWER) == "UNAUTHENTICATED"
    assert await count_rows(db, tenant.project_id) == (0, 0)


async def test_a_withdrawn_entitlement_answers_404_on_another_instance(http, second, tenant, db):
    await GraphQLClient(http, tenant.key, "alice").ok(VIEWER)
    client = GraphQLClient(second, tenant.key, "alice")
    await client.ok(VIEWER)
    await db.execute(
        "update projects set memory_enabled = false where id = %s", (tenant.project_id,)
    )
    response = await second.post("/graphql", json={"query": VIEWER}, headers=client.headers())
    assert response.status_code == 404


async def test_a_revocation_no_instance_heard_of_still_reads_and_writes_nothing(http, tenant, db):
    """Every transaction checks the key again: even a cache that missed the change (here the
    trigger is skipped, as replication would) cannot serve a revoked key's data."""
    alice = GraphQLClient(http, tenant.key, "alice")
    await alice.ok(SAVE, {"input": NEW})
    async with db.transaction():
        await db.execute("set local session_replication_role = replica")
        await db.execute(
            "update api_keys set revoked_at = now() where project_id = %s", (tenant.project_id,)
        )
    assert await alice.error(LIST) == "UNAUTHENTICATED"
    assert await alice.error(SAVE, {"input": {**NEW, "content": "Lives in Lisbon"}}) == (
        "UNAUTHENTICATED"
    )
    assert await count_rows(db, tenant.project_id) == (1, 1)


async def test_the_cache_empties_and_stops_serving_when_its_listener_is_cut(database_url):
    proxy = Proxy(database_url)
    url = await proxy.start()
    cache: CredentialCache[str] = CredentialCache()
    task = asyncio.create_task(cache.listen(url, health_every=0.5, retry=0.2))
    resolved: list[str] = []

    async def resolve() -> str:
        resolved.append("db")
        return "owner"

    async def holds(owner: str) -> bool:
        return True

    try:
        for _ in range(100):
            if cache.listening:
                break
            await asyncio.sleep(0.05)
        assert cache.listening
        assert await cache.get("k", resolve, holds) == "owner"
        assert await cache.get("k", resolve, holds) == "owner"
        assert resolved == ["db"]  # the second answer came from the cache
        await proxy.stop()
        for _ in range(100):
            if not cache.listening:
                break
            await asyncio.sleep(0.05)
        assert not cache.listening
        assert len(cache) == 0
        await cache.get("k", resolve, holds)
        await cache.get("k", resolve, holds)
        assert resolved == ["db", "db", "db"]  # nothing kept while no one listens
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await proxy.stop()


async def test_a_notification_empties_the_cache(database_url, tenant, db):
    cache: CredentialCache[str] = CredentialCache()
    task = asyncio.create_task(cache.listen(database_url))
    try:
        for _ in range(100):
            if cache.listening:
                break
            await asyncio.sleep(0.05)

        async def resolve() -> str:
            return "owner"

        async def holds(owner: str) -> bool:
            return True

        await cache.get("k", resolve, holds)
        assert len(cache) == 1
        # a last_used_at write is not a change of credential
        await db.execute(
            "update api_keys set last_used_at = now() where project_id = %s", (tenant.project_id,)
        )
        await asyncio.sleep(0.3)
        assert len(cache) == 1
        await db.execute(
            "update api_keys set revoked_at = now() where project_id = %s", (tenant.project_id,)
        )
        for _ in range(100):
            if len(cache) == 0:
                break
            await asyncio.sleep(0.02)
        assert len(cache) == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_change_announced_while_a_kept_answer_is_probed_is_resolved_afresh(
    database_url, tenant, db
):
    """The notification of a change (here a revocation) empties the cache while a request's
    probe of its kept answer is out: the request resolves again rather than trusting a probe
    that may predate the change (and is not a 500: the entry it would refresh is gone)."""
    cache: CredentialCache[str] = CredentialCache()
    async with listening(cache, database_url):
        async with asyncio.timeout(10):  # a loaded machine may take over the helper's second
            while not cache.listening:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        resolved: list[str] = []

        async def resolve() -> str:
            resolved.append(f"owner-{len(resolved) + 1}")
            return resolved[-1]

        async def holds(owner: str) -> bool:
            return True

        async def holds_while_revoked(owner: str) -> bool:
            await db.execute(
                "update api_keys set revoked_at = now() where project_id = %s",
                (tenant.project_id,),
            )
            for _ in range(100):
                if len(cache) == 0:
                    break
                await asyncio.sleep(0.02)
            assert len(cache) == 0, "the notification did not arrive"
            return True

        assert await cache.get("k", resolve, holds) == "owner-1"
        assert await cache.get("k", resolve, holds) == "owner-1"
        assert await cache.get("k", resolve, holds_while_revoked) == "owner-2"
        assert resolved == ["owner-1", "owner-2"]
