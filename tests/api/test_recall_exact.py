"""Recall stays exact under filters: a selective filter still returns k results when k exist."""

from __future__ import annotations

import pytest

from memql.testing import GraphQLClient
from tests.operations import RECALL, SAVE_MANY

# the other memories must really be closer (the model's sense) for the filter to matter
pytestmark = pytest.mark.model


async def test_a_selective_filter_returns_every_match_among_many_closer_memories(
    alice: GraphQLClient, bob: GraphQLClient
):
    ops = [
        {
            "content": f"Deploy step {i}: run the deployment pipeline for service {i}.",
            "kind": "OPERATIONAL",
            "category": "ops",
        }
        for i in range(60)
    ]
    personal = [
        {"content": text, "kind": "TOPICAL", "category": "personal"}
        for text in (
            "Has a greyhound called Pixel.",
            "Is learning Portuguese.",
            "Drinks oat-milk flat whites.",
            "Plays cricket on Saturdays.",
            "Sings in a community choir.",
        )
    ]
    await alice.ok(SAVE_MANY, {"inputs": ops})
    await alice.ok(SAVE_MANY, {"inputs": personal})
    await bob.ok(SAVE_MANY, {"inputs": [dict(p, category="personal") for p in ops[:40]]})

    # 60 operational memories match the query far better; the filter keeps only the 5 others
    hits = (
        await alice.ok(
            RECALL, {"query": "how do I run the deployment", "limit": 5, "categories": ["personal"]}
        )
    )["recall"]
    assert sorted(h["memory"]["content"] for h in hits) == sorted(p["content"] for p in personal)
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)

    hits = (
        await alice.ok(RECALL, {"query": "deployment pipeline", "limit": 20, "kinds": ["TOPICAL"]})
    )["recall"]
    assert len(hits) == 5
    assert {h["memory"]["kind"] for h in hits} == {"TOPICAL"}
