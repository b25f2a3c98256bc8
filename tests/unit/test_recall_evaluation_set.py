"""The checked-in recall evaluation set (bench/recall/set, background.json): large, varied and
consistently labelled, so bench/recall/run.py measures what it says."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).parents[2] / "bench" / "recall"


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
