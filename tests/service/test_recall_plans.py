"""Recall's statement is prepared (planned once, generically) only when unfiltered: a filtered
recall is planned for its own filter every time, because the generic plan, blind to how few rows
a filter keeps, was several times slower at a million memories (docs/scale.md). Each set of
scopes has its own statement, holding only the branches of the scopes it reads."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memql.db import recall as db_recall
from memql.db.pool import open_pool
from memql.db.session import Sessions
from memql.model import Access, Consumer, Grant, Principal, Scope
from memql.requests import Criteria, MemoryFilter
from memql.service import DEFAULT_WEIGHTS
from memql.testing import Tenant

RUNS = 8  # psycopg prepares a statement on its fifth run


async def prepared_recalls(
    tenant: Tenant,
    database_url: str,
    categories: Sequence[str] | None,
    scopes: Sequence[Scope] = (Scope.USER, Scope.PROJECT),
) -> list[str]:
    """The recall statements the pooled connection holds prepared after RUNS recalls."""
    principal = Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip
    vector = np.full(384, 384**-0.5, dtype=np.float32)
    pool = await open_pool(database_url, min_size=1, max_size=1)
    try:
        sessions = Sessions(pool)
        for _ in range(RUNS):
            async with sessions.read(principal, db_recall.RECALL_SETTINGS) as conn:
                ranked = await db_recall.recall(
                    conn, principal, query="tea or coffee", embedding=vector, model="m",
                    criteria=Criteria(tuple(scopes), MemoryFilter(categories=categories)),
                    weights=DEFAULT_WEIGHTS, limit=5, routed=sessions.distributed,
                )  # fmt: skip
            assert await ranked.hits() == []
        async with pool.connection() as conn:
            cur = await conn.execute(
                "select statement from pg_prepared_statements where statement like %s",
                ("%with q as materialized%",),
            )
            return [row[0] for row in await cur.fetchall()]
    finally:
        await pool.close()


async def test_an_unfiltered_recall_is_prepared(tenant: Tenant, database_url: str):
    assert len(await prepared_recalls(tenant, database_url, None)) == 1


async def test_a_filtered_recall_is_planned_for_its_filter_every_time(
    tenant: Tenant, database_url: str
):
    assert await prepared_recalls(tenant, database_url, ["rare"]) == []


async def test_a_user_scope_recall_reads_no_branch_of_the_shared_scope(
    tenant: Tenant, database_url: str
):
    [user] = await prepared_recalls(tenant, database_url, None, [Scope.USER])
    assert "m.scope = 'user'" in user
    assert "m.scope = 'project'" not in user and "<=> $" in user
    [shared] = await prepared_recalls(tenant, database_url, None, [Scope.PROJECT])
    assert "m.scope = 'project'" in shared and "m.scope = 'user'" not in shared
