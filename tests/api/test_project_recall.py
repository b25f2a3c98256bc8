"""Project-scope recall over many shared memories: a selective filter scores the few rows it keeps
(exact), a broad one goes through the HNSW index with an iterative scan; either way k results
come back when k exist."""

from __future__ import annotations

import psycopg
import pytest
from pgvector.psycopg import register_vector_async

from memql.db import embedding_space as space
from memql.db import recall as db_recall
from memql.db.session import is_distributed
from memql.embeddings.local import LocalEmbedder
from memql.model import Access, Consumer, Grant, Kind, Principal, Scope
from memql.requests import Criteria, MemoryFilter
from memql.service import DEFAULT_WEIGHTS
from memql.testing import GraphQLClient, Tenant
from tests.operations import RECALL, SAVE_MANY

# "nearest" must mean what the model means for the routes to be compared
pytestmark = pytest.mark.model

PERSONAL = [
    "The office dog is called Pixel.",
    "The team lunch is on Fridays.",
    "The coffee machine is descaled monthly.",
    "The book club reads one novel a month.",
    "The office plants are watered on Mondays.",
]


async def _save_project_memories(alice: GraphQLClient, count: int) -> None:
    ops = [
        {
            "content": f"Deploy runbook {i}: run the deployment pipeline for service {i}.",
            "kind": "OPERATIONAL",
            "scope": "PROJECT",
            "category": "ops",
        }
        for i in range(count)
    ]
    for start in range(0, count, 100):
        await alice.ok(SAVE_MANY, {"inputs": ops[start : start + 100]})
    await alice.ok(
        SAVE_MANY,
        {
            "inputs": [
                {"content": c, "kind": "TOPICAL", "scope": "PROJECT", "category": "office"}
                for c in PERSONAL
            ]
        },
    )


async def _filtered_recall(
    tenant: Tenant, database_url: str, embedder: LocalEmbedder, *, large: bool = False
) -> tuple[list[str], int]:
    """Recall of category `office` (5 of 305 shared rows): the contents, and how many times the
    HNSW index was scanned."""
    principal = Principal(
        tenant.project_id,
        tenant.project_name,
        "alice",
        Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )
    [query] = await embedder.embed(["how do I run the deployment pipeline"])
    index = space.ann_index_name(embedder.dimensions)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await register_vector_async(conn)
        if await is_distributed(conn):
            # the index lives on the workers' shards, whose scans this server does not count
            # (a project's recall is one shard's statement there: tests/cluster/test_citus.py)
            pytest.skip(reason="on Citus the workers scan the index; test_citus.py checks it")
        cur = await conn.execute("select 1 from pg_class where relname = %s", (index,))
        assert await cur.fetchone() is not None, "the server builds the index on start"
        async with conn.transaction():
            # as in a large project, where scanning every shared row would cost too much
            await conn.execute("set local enable_seqscan = off")
            if large:
                # and sorting every matching shared row too: on a test database's statistics
                # the planner may sort a few hundred rows instead of walking the graph
                await conn.execute("set local enable_sort = off")
            for name, value in db_recall.RECALL_SETTINGS:
                await conn.execute("select set_config(%s, %s, true)", (name, value))
            ranked = await db_recall.recall(
                conn,
                principal,
                query="how do I run the deployment pipeline",
                embedding=query,
                model=embedder.model,
                criteria=Criteria(
                    (Scope.PROJECT,), MemoryFilter(kinds=(Kind.TOPICAL,), categories=("office",))
                ),
                weights=DEFAULT_WEIGHTS,
                limit=5,
            )
            rows = await ranked.hits()
            # scans of the index in this transaction (no wait for the statistics collector)
            cur = await conn.execute("select pg_stat_get_xact_numscans(%s::regclass)", (index,))
            row = await cur.fetchone()
            assert row is not None
    return [m.content for m, _, _ in rows], int(row[0])


async def test_a_selective_filter_scores_every_row_it_keeps(
    alice: GraphQLClient, tenant: Tenant, database_url: str, embedder: LocalEmbedder
):
    await _save_project_memories(alice, 300)
    contents, index_scans = await _filtered_recall(tenant, database_url, embedder)
    assert index_scans == 0, "a filter keeping 5 rows should not walk the HNSW graph"
    assert sorted(contents) == sorted(PERSONAL)

    # and through the API, with the planner's own choice
    hits = (
        await alice.ok(
            RECALL,
            {"query": "how do I run the deployment pipeline", "limit": 5, "categories": ["office"]},
        )
    )["recall"]
    assert sorted(h["memory"]["content"] for h in hits) == sorted(PERSONAL)


async def test_a_broad_filter_goes_through_the_index_and_still_returns_k(
    alice: GraphQLClient,
    tenant: Tenant,
    database_url: str,
    embedder: LocalEmbedder,
    monkeypatch,
):
    await _save_project_memories(alice, 300)
    # as if 5 rows were many: the HNSW route, whose scan skips the 300 closer rows the filter
    # rejects and keeps going
    monkeypatch.setattr(db_recall, "EXACT_SCAN_ROWS", 3)
    contents, index_scans = await _filtered_recall(tenant, database_url, embedder, large=True)
    assert index_scans > 0, "the HNSW index was not used"
    assert sorted(contents) == sorted(PERSONAL)
