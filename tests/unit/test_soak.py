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


def test_by_default_two_runs_of_25_s_beside_every_hostile_behaviour(soak: ModuleType):
    args = soak.parse_args([])
    assert args.seconds == 25 and args.hostile == ["hooks", "bursts", "padded"]
    assert args.server_env == []


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
