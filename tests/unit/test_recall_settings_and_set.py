"""The recall weights setting, and the shape of the checked-in evaluation set."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from memql.errors import ConfigurationError
from memql.model import Weights
from memql.service import DEFAULT_WEIGHTS
from memql.settings import Settings

BENCH = Path(__file__).parents[2] / "bench" / "recall"


def test_recall_weights_are_read_from_the_environment():
    s = Settings.from_env(
        {"MEMQL_RECALL_WEIGHTS": "vector=0.6, lexical=0.3, recency=0.05, pinned=0.05"}
    )
    assert s.recall_weights == Weights(0.6, 0.3, 0.05, 0.05, 90.0)
    s = Settings.from_env({"MEMQL_RECALL_WEIGHTS": "lexical=1,half_life_days=7"})
    assert s.recall_weights == Weights(0.0, 1.0, 0.0, 0.0, 7.0)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("vector=0.5", "sum to 1"),
        ("vector=1.2,lexical=-0.2", "in [0, 1]"),
        ("vector=1,speed=0", "expected name=value pairs"),
        ("vector=one", "is not a number"),
        ("vector=1,half_life_days=0", "half-life must be positive"),
    ],
)
def test_bad_recall_weights_refuse_to_start_with_a_reason(raw, says):
    with pytest.raises(ConfigurationError, match=re.escape(says)):
        Settings.from_env({"MEMQL_RECALL_WEIGHTS": raw})


def test_the_default_weights_keep_the_score_in_unit_range_and_meaning_first():
    w = DEFAULT_WEIGHTS
    assert w.vector + w.lexical + w.recency + w.pinned == pytest.approx(1.0)
    assert w.vector > w.lexical > max(w.recency, w.pinned)


def test_the_evaluation_set_is_large_varied_and_consistently_labelled():
    files = sorted((BENCH / "set").glob("*.json"))
    background = json.loads((BENCH / "background.json").read_text())["memories"]
    background_ids = {m[0] for m in background}
    assert len(files) >= 8
    types: Counter[str] = Counter()
    queries = 0
    for f in files:
        user = json.loads(f.read_text())
        ids = [m[0] for m in user["memories"]]
        assert len(ids) == len(set(ids)) and len(ids) >= 15, f.name
        assert not set(ids) & background_ids, f.name
        for kind in {m[1] for m in user["memories"]}:
            assert kind in ("topical", "episodic", "operational"), f.name
        for qtype, text, relevant in user["queries"]:
            assert text.strip() and relevant, (f.name, text)
            assert set(relevant) <= set(ids), (f.name, text)  # background answers nothing
            types[qtype] += 1
            queries += 1
    assert queries >= 300
    assert set(types) == {"paraphrase", "exact", "dated", "procedure", "distractor"}
    assert min(types.values()) >= 30
