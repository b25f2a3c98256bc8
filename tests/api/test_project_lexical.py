"""Full text over a large shared scope reads a bounded set of rows: those holding two or more
of the query's words, and a few holding each word. A rare word's rows (a name, a code) come in
however many rows hold the query's common words, and so does every row holding several of its
words; odd query text is matched, never an error."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector_async

from memql.db import recall as db_recall
from memql.db.session import bind_principal, is_distributed
from memql.embeddings.local import LocalEmbedder
from memql.model import Access, Consumer, Grant, Principal, Scope
from memql.requests import Criteria
from memql.service import DEFAULT_WEIGHTS
from memql.testing import GraphQLClient, Tenant
from tests.operations import RECALL, SAVE_MANY

# the query's vector is placed far from the rows full text must bring in: far as the model
# sees it
pytestmark = pytest.mark.model

RARE = "The Zanzibar cluster hosts the billing database."
CANARIES = [f"Canary release {i} flips the blue green switch at noon." for i in range(20)]


async def _save_shared(alice: GraphQLClient, contents: list[str]) -> None:
    inputs = [{"content": c, "kind": "OPERATIONAL", "scope": "PROJECT"} for c in contents]
    for start in range(0, len(inputs), 100):
        data = await alice.ok(SAVE_MANY, {"inputs": inputs[start : start + 100]})
        assert all(p["outcome"] == "CREATED" for p in data["saveMemories"])


def _runbooks(n: int) -> list[str]:
    return [f"Deploy runbook {i}: run the deployment pipeline for service {i}." for i in range(n)]


async def _candidates(
    tenant: Tenant, database_url: str, embedder: LocalEmbedder, query: str, near: str
) -> list[str]:
    """Every shared memory recall scores for `query` (its whole pool), with the vector of
    `near` as the query's vector."""
    principal = Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip
    [vector] = await embedder.embed([near])
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await register_vector_async(conn)
        distributed = await is_distributed(conn)
        await conn.commit()
        async with conn.transaction():
            await bind_principal(
                conn, principal, db_recall.RECALL_SETTINGS, distributed=distributed
            )
            await conn.execute("set local role memql_app")
            ranked = await db_recall.recall(
                conn, principal, query=query, embedding=vector, model=embedder.model,
                criteria=Criteria((Scope.PROJECT,)), weights=DEFAULT_WEIGHTS, limit=100_000,
                routed=distributed,
            )  # fmt: skip
            rows = await ranked.hits()
    return [m.content for m, _, _ in rows]


async def test_a_rare_words_rows_are_candidates_among_many_rows_of_a_common_word(
    alice: GraphQLClient, tenant: Tenant, database_url: str, embedder: LocalEmbedder,
    monkeypatch: pytest.MonkeyPatch,
):  # fmt: skip
    await _save_shared(alice, [*_runbooks(120), RARE])
    # a pool smaller than the rows holding `deploy`, which rank above the rare row (the word
    # twice in each): ranking every match would fill the pool with them
    monkeypatch.setattr(db_recall, "PROJECT_POOL", 20)
    found = await _candidates(
        tenant, database_url, embedder, "zanzibar deploy", near="run the deployment pipeline"
    )
    assert RARE in found
    # and the pool stays bounded: 20 by vector, 20 by full text
    assert len(found) <= 40


async def test_every_row_holding_several_query_words_is_a_candidate(
    alice: GraphQLClient, tenant: Tenant, database_url: str, embedder: LocalEmbedder,
    monkeypatch: pytest.MonkeyPatch,
):  # fmt: skip
    await _save_shared(alice, [*_runbooks(120), *CANARIES])
    # one row per word: only the rows holding two of the words can bring all twenty canaries
    monkeypatch.setattr(db_recall, "LEXICAL_PER_WORD", 1)
    monkeypatch.setattr(db_recall, "PROJECT_POOL", 30)
    found = await _candidates(
        tenant, database_url, embedder, "canary switch deploy", near="The office dog is Pixel."
    )
    assert set(CANARIES) <= set(found)


@pytest.mark.parametrize(
    "query",
    [
        "O'Brien's \\ back\\slash & | ! (deploy) :* <-> 'quoted'",
        "the and of a",  # only stop words: no lexeme at all
        "deploy deploy DEPLOY deploying",  # one word, many times
        " ".join(f"word{i} deploy{i}" for i in range(40)),  # more words than are looked up
    ],
)
async def test_odd_query_text_is_matched_not_an_error(alice: GraphQLClient, query: str):
    await _save_shared(alice, [*_runbooks(5), RARE])
    data: dict[str, Any] = await alice.ok(RECALL, {"query": query, "limit": 5, "scope": "PROJECT"})
    assert len(data["recall"]) == 5
