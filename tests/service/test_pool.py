"""The request pool under pressure. Cancelled work never costs the pool a connection: requests
cancelled at any point of their checkout (waiting for a connection, using it, giving it back)
leave every connection available again within a second, and the next request is served.
Before, a cancellation that landed while a connection was being given back (the pool's lock,
the next waiter's lock) dropped it: idle in PostgreSQL, open in the pool's count, never lent
again. A request's database work ends at its deadline; a project holds at most its share of
the pool."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from graphql.pyutils import gather_with_cancel

from memql.db.pool import open_pool
from memql.db.session import Sessions, request_deadline
from memql.errors import DeadlineExceeded, ServiceUnavailable
from memql.model import Access, Consumer, Grant, Principal
from memql.testing import Tenant

POOL = 3
TASKS = 100


def principal_of(tenant: Tenant) -> Principal:
    return Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip


async def all_available(pool, within: float) -> dict[str, int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        stats = pool.get_stats()
        if stats.get("pool_available", 0) == stats.get("pool_size") == POOL:
            return stats
        if loop.time() > deadline:
            return stats
        await asyncio.sleep(0.02)


async def test_requests_cancelled_anywhere_in_their_checkout_give_every_connection_back(
    tenant: Tenant, database_url: str
):
    pool = await open_pool(database_url, min_size=POOL, max_size=POOL, wait=0.05)
    sessions = Sessions(pool)
    principal = principal_of(tenant)

    async def read(i: int) -> None:
        # the two kinds of block the request path uses, a read pipeline and a transaction
        if i % 2:
            async with sessions.read(principal) as conn:
                await conn.execute("select pg_sleep(0.005)")
        else:
            async with sessions.bound(principal) as conn:
                await conn.execute("select pg_sleep(0.005)")

    try:
        for _ in range(20):
            # as GraphQL runs a request's fields: when one fails (here: no connection within
            # the pool's short wait), the others are cancelled wherever they are (waiting,
            # querying, giving their connection back while timed-out waiters hold its locks)
            with contextlib.suppress(ServiceUnavailable):
                await asyncio.wait_for(gather_with_cancel(*(read(i) for i in range(TASKS))), 30)
        stats = await all_available(pool, within=1.0)
        assert stats["pool_available"] == stats["pool_size"] == POOL, stats
        assert stats.get("requests_waiting", 0) == 0, stats
        # and a request afterwards is served at once
        async with sessions.read(principal) as conn:
            cur = await conn.execute("select 1")
            assert await cur.fetchone() == (1,)
    finally:
        await pool.close()


async def test_a_request_deadline_ends_its_statements_and_refuses_later_checkouts(
    tenant: Tenant, database_url: str
):
    """Within `request_deadline` a statement that would run past it is cancelled by
    PostgreSQL (statement_timeout) and reported as REQUEST_TIMEOUT; once it has passed, a
    checkout is refused at once; the connection is available again afterwards."""
    pool = await open_pool(database_url, min_size=1, max_size=1, wait=5)
    sessions = Sessions(pool)
    principal = principal_of(tenant)
    loop = asyncio.get_running_loop()
    try:
        with request_deadline(0.5):
            started = loop.time()
            with pytest.raises(DeadlineExceeded):
                async with sessions.read(principal) as conn:
                    await conn.execute("select pg_sleep(5)")
            assert loop.time() - started < 2.5
            with pytest.raises(DeadlineExceeded):
                async with sessions.bound(principal) as conn:
                    await conn.execute("select pg_sleep(5)")
            assert loop.time() - started < 2.5
        # outside any deadline, the same connection serves again
        async with sessions.read(principal) as conn:
            cur = await conn.execute("select current_setting('statement_timeout')")
            assert await cur.fetchone() == ("0",)
        assert (await all_available(pool, within=1.0))["pool_available"] == 1
    finally:
        await pool.close()


async def test_one_projects_burst_leaves_the_rest_of_the_pool_to_the_others(
    tenant: Tenant, database_url: str
):
    """A project holds at most its share of the pool: while one project's requests hold all
    of theirs (and more wait), another project's request is served at once."""
    from memql.testing import make_tenant

    other = await make_tenant(database_url)
    pool = await open_pool(database_url, min_size=2, max_size=2, wait=5)
    sessions = Sessions(pool, project_slots=1)
    busy, calm = principal_of(tenant), principal_of(other)
    release = asyncio.Event()

    async def hold() -> None:
        async with sessions.read(busy) as conn:
            await conn.execute("select 1")
            await release.wait()

    holders = [asyncio.create_task(hold()) for _ in range(5)]
    try:
        await asyncio.sleep(0.2)
        assert sessions.shares.stats() == {"waiting": 4, "projects_full": 1}
        async with asyncio.timeout(2):
            async with sessions.read(calm) as conn:
                cur = await conn.execute("select 1")
                assert await cur.fetchone() == (1,)
    finally:
        release.set()
        await asyncio.gather(*holders)
        await pool.close()
    assert sessions.shares.stats() == {"waiting": 0, "projects_full": 0}
