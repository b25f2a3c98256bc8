"""bench/soak.py's options and the hostile tenant's requests: what it is told to do, and
that its batches hold exactly the budget they are meant to test."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest
from graphql import parse
from strawberry.extensions.max_aliases import count_fields_with_alias

BENCH = Path(__file__).parents[2] / "bench"


@pytest.fixture
def soak(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("soak")


def test_by_default_three_rounds_of_25_s_alone_then_beside_every_hostile_behaviour(
    soak: ModuleType,
):
    args = soak.parse_args([])
    assert (args.seconds, args.rounds) == (25, 3)
    assert args.hostile == ["hooks", "bursts", "padded"]
    assert args.server_env == []


def phase(ms: dict[str, list[float]], saves: dict[str, float], seen: dict[str, float]) -> dict:
    ordinary = {"ms": ms, "statuses": {"recall 200": len(ms["recall"])}, "codes": {}}
    ordinary |= {"saves": saves, "subscription": seen}
    hostile = {"seen": {"bursts": 1}, "statuses": {"429": 2}}
    return {"ordinary": ordinary, "hostile": hostile, "webhook": seen, "most_at_once": 3}


def test_the_rounds_of_a_condition_are_pooled_before_their_p99_is_taken(soak: ModuleType):
    # alone: recalls of 10 ms, and one of 30 in the second round; beside: 20 ms throughout
    alone = [
        phase({"recall": [10.0] * 99, "list": [5.0], "save": [8.0]}, {"a": 0.0}, {"a": 0.01}),
        phase(
            {"recall": [10.0] * 99 + [30.0], "list": [5.0], "save": [8.0]}, {"b": 1.0}, {"b": 1.01}
        ),
    ]
    beside = [
        phase({"recall": [20.0] * 100, "list": [5.0], "save": [8.0]}, {"c": 2.0}, {"c": 2.01}),
        phase({"recall": [20.0] * 100, "list": [5.0], "save": [8.0]}, {"d": 3.0}, {"d": 3.01}),
    ]
    pooled = soak.pooled(alone)
    assert len(pooled["ordinary"]["ms"]["recall"]) == 199
    assert pooled["ordinary"]["saves"] == {"a": 0.0, "b": 1.0}
    assert pooled["ordinary"]["statuses"] == {"recall 200": 199}
    assert pooled["hostile"]["statuses"] == {"429": 4}
    rows = soak.p99_rows(pooled, soak.pooled(beside))
    assert rows["recall"][2] == "199 / 200"
    assert rows["save sent → webhook event"][2] == "2 / 2 (missed 0 / 0)"
    # pooled, the slowest recall alone (30 ms) is not the p99 of 199: 20 / 10
    assert soak.worst_ratio(rows) == 2.0


def test_hostile_behaviours_are_chosen_by_name_and_unknown_ones_refused(soak: ModuleType):
    assert soak.parse_args(["--hostile", "padded, hooks"]).hostile == ["hooks", "padded"]
    for bad in ("slowloris", "", "hooks,nope"):
        with pytest.raises(SystemExit):
            soak.parse_args(["--hostile", bad])


def test_server_settings_are_name_value_pairs(soak: ModuleType):
    args = soak.parse_args(["--server-env", "MEMQL_RATE_PER_KEY=50", "--server-env", "A=b=c"])
    assert args.server_env == [("MEMQL_RATE_PER_KEY", "50"), ("A", "b=c")]
    for bad in ("MEMQL_RATE_PER_KEY", "=5", "not a name=1"):
        with pytest.raises(SystemExit):
            soak.parse_args(["--server-env", bad])


def test_a_run_needs_a_length_and_rates(soak: ModuleType):
    for bad in (["--seconds", "0"], ["--recalls", "-1"], ["--burst", "-2"]):
        with pytest.raises(SystemExit):
            soak.parse_args(bad)


def test_the_batches_hold_the_alias_budget_exactly_and_twenty_times_over(soak: ModuleType):
    def aliases(batch: list[dict[str, str]]) -> int:
        return sum(count_fields_with_alias(parse(op["query"]).definitions[0]) for op in batch)

    most, over = soak.aliased_batch(20, 30), soak.aliased_batch(20, 600)
    assert (len(most), aliases(most)) == (20, 30)
    assert (len(over), aliases(over)) == (20, 600)


def test_a_padded_document_is_mostly_comments_and_within_its_size(soak: ModuleType):
    document = soak.padded_document(7, 65536 - 64)
    assert 60_000 < len(document.encode()) <= 65536 - 64
    assert parse(document).definitions[0].selection_set.selections[0].name.value == "__typename"
