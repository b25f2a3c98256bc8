"""Rewordings give way in recall: a hit close in meaning to one ranked above it (cosine past
0.6) loses 0.6 times the excess, so a second wording of one memory does not push a different
memory out of the top few; the first hit never moves and scores stay in [0, 1]. The word-hash
stand-in makes the cosines exact: the mechanism is checked here, its effect on real
conversations by `bench/recall/locomo.py` (docs/recall.md)."""

from __future__ import annotations

import numpy as np
import pytest

from memql.db.recall import ALIKE_ABOVE, REDUNDANCY_PENALTY
from memql.model import Access, Consumer, Grant, Kind, Principal, RecallHit
from memql.requests import MemoryDraft, RecallQuery
from memql.runtime import open_memql
from memql.service import DEFAULT_WEIGHTS
from memql.settings import Settings
from memql.testing import HashEmbedder

QUERY = "alpha beta gamma delta epsilon theta iota kappa"
FIRST = "alpha beta gamma delta epsilon"
# FIRST with one word more: a rewording of it (cosine 0.91, under the absorption threshold)
REWORDED = "alpha beta gamma delta epsilon lambda"
# another memory: fewer of the query's words, little of FIRST's
OTHER = "alpha theta iota kappa mu"


def cosine(embedder: HashEmbedder, a: str, b: str) -> float:
    return float(np.dot(embedder.vector(a), embedder.vector(b)))


def fused(hit: RecallHit) -> float:
    s, w = hit.signals, DEFAULT_WEIGHTS
    return w.vector * s.vector + w.lexical * s.lexical + w.recency * s.recency + w.pinned * s.pinned


async def test_a_rewording_gives_way_to_another_memory_and_the_first_hit_stays(
    database_url: str, tenant
):
    embedder = HashEmbedder()
    alice = Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip
    settings = Settings(database_url=database_url, pool_min_size=1, pool_max_size=2)
    async with open_memql(settings, embedder=embedder) as memql:
        for text in (FIRST, REWORDED, OTHER):
            await memql.service.save(alice, MemoryDraft(text, Kind.TOPICAL))
        hits = await memql.service.recall(alice, RecallQuery(QUERY, limit=3))
    by_text = {h.memory.content: h for h in hits}
    first, reworded, other = by_text[FIRST], by_text[REWORDED], by_text[OTHER]
    # without the penalty the rewording would rank second
    assert fused(first) > fused(reworded) > fused(other)
    assert [h.memory.content for h in hits] == [FIRST, OTHER, REWORDED]
    # each hit is measured against those above it by the fused score: the first against none
    assert first.signals.redundancy == 0 and first.score == pytest.approx(fused(first))
    alike = cosine(embedder, REWORDED, FIRST)
    assert reworded.signals.redundancy == pytest.approx(alike, abs=1e-5)
    assert alike > ALIKE_ABOVE
    unlike = max(cosine(embedder, OTHER, FIRST), cosine(embedder, OTHER, REWORDED))
    assert other.signals.redundancy == pytest.approx(unlike, abs=1e-5)
    assert unlike < ALIKE_ABOVE
    assert other.score == pytest.approx(fused(other))
    assert reworded.score == pytest.approx(
        fused(reworded) - REDUNDANCY_PENALTY * (alike - ALIKE_ABOVE)
    )
    assert all(0 <= h.score <= 1 for h in hits)
