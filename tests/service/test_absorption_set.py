"""The labelled absorption pairs (bench/absorb/pairs.jsonl) hold at the configured threshold,
with the real model's similarities. (A contradiction reported, not absorbed, over the API:
tests/api/test_meaning.py.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from memql.embeddings.local import LocalEmbedder
from memql.settings import Settings

pytestmark = pytest.mark.model

CALIBRATE = Path(__file__).parents[2] / "bench" / "absorb" / "calibrate.py"


def _calibration():
    spec = importlib.util.spec_from_file_location("absorb_calibrate", CALIBRATE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
async def pairs(embedder: LocalEmbedder):
    return await _calibration().labelled_pairs(embedder)


async def test_no_labelled_contradiction_is_absorbed_at_any_threshold_from_the_near_bar(pairs):
    contradictions = [p for p in pairs if p.label == "contradiction"]
    assert len(contradictions) >= 20
    for threshold in (0.80, 0.85, 0.90, 0.95):
        assert not [p for p in contradictions if p.absorbed(threshold)], threshold


async def test_nothing_that_must_stay_apart_is_absorbed_at_the_configured_threshold(pairs):
    rates = _calibration().rates(pairs, Settings().absorb_threshold)
    assert rates["false_absorb"] == 0.0
    assert rates["contradictions_absorbed"] == 0
    # the price of that safety, as docs/recall.md reports it: most paraphrases stay apart
    assert rates["missed_duplicate"] < 0.75


async def test_the_same_text_under_another_kind_is_never_absorbed(pairs):
    other_kind = [p for p in pairs if p.label == "other_kind"]
    assert other_kind and all(p.similarity > 0.999 for p in other_kind)
    assert not [p for p in other_kind if p.absorbed(0.80)]
