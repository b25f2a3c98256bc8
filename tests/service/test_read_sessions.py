"""A read on behalf of a principal (`Sessions.read`) runs its binding and its statements in one
implicit transaction and one round trip, and leaves the pooled connection as it found it; when
the credential no longer holds, the statements sent after the binding never run."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from memql.db.pool import open_pool
from memql.db.session import Sessions
from memql.errors import Unauthenticated
from memql.model import Access, Consumer, Grant, Principal
from memql.testing import Tenant


def principal_of(tenant: Tenant, key_id: Any = None) -> Principal:
    return Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE), key_id=key_id,
    )  # fmt: skip


async def test_a_read_is_one_transaction_bound_to_the_principal_and_leaves_nothing_behind(
    tenant: Tenant, database_url: str
):
    pool = await open_pool(database_url, min_size=1, max_size=1)
    try:
        sessions = Sessions(pool)
        async with sessions.read(principal_of(tenant), [("hnsw.ef_search", "77")]) as conn:
            first = await conn.execute(
                "select current_setting('memql.user_id'), current_setting('hnsw.ef_search'), now()"
            )
            second = await conn.execute("select now(), current_user")
        bound = await first.fetchone()
        after = await second.fetchone()
        assert bound is not None and after is not None
        assert bound[:2] == ("alice", "77")
        assert after == (bound[2], "memql_app"), "one transaction, as the request role"
        # the same pooled connection afterwards: nothing bound, a transaction of its own again
        async with pool.connection() as conn:
            assert not conn.autocommit
            cur = await conn.execute(
                "select current_setting('memql.user_id', true), current_setting('hnsw.ef_search')"
            )
            user, ef_search = await cur.fetchone() or (None, None)
            assert not user
            assert ef_search != "77"
    finally:
        await pool.close()


async def test_a_stale_credential_runs_nothing_after_the_binding(
    tenant: Tenant, database_url: str, db: psycopg.AsyncConnection[Any]
):
    cur = await db.execute("select id from api_keys where project_id = %s", (tenant.project_id,))
    row = await cur.fetchone()
    assert row is not None
    await db.execute("update api_keys set revoked_at = now() where id = %s", (row[0],))
    pool = await open_pool(database_url, min_size=1, max_size=1)
    try:
        with pytest.raises(Unauthenticated):
            async with Sessions(pool).read(principal_of(tenant, row[0])) as conn:
                # would fail with its own error if it ran
                await conn.execute("select 1 / 0")
    finally:
        await pool.close()
