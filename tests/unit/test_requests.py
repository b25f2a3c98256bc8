"""memql.requests: every field of every operation's record carries its words, its bounds and its
names once, and a record is built back from its arguments as the transports pass them."""

from __future__ import annotations

import dataclasses
import re
import typing
from datetime import UTC, datetime

import pytest

from memql import requests
from memql.errors import BadInput
from memql.model import Kind, Scope
from memql.requests import (
    ContextQuery,
    MemoryDraft,
    MemoryFilter,
    MemoryRef,
    PageRequest,
    RecallQuery,
    arguments,
    build,
    describe,
    less,
)
from memql.settings import LIMITS, Limits

LIMIT_NAMES = {f.name for f in dataclasses.fields(Limits)}


def every_argument() -> list[requests.Arg]:
    return [arg for record in requests.RECORDS for arg in arguments(record)]


@pytest.mark.parametrize("record", requests.RECORDS, ids=lambda r: r.__name__)
def test_every_field_says_what_it_is_for_the_transports(record):
    for f in dataclasses.fields(record):
        assert "memql.api" in f.metadata or "memql.nested" in f.metadata, f"{record}.{f.name}"


def test_every_placeholder_in_the_words_is_a_limit_or_an_enum():
    for arg in every_argument():
        for text in (arg.api.description, arg.api.agents or ""):
            for name in re.findall(r"\{([A-Za-z_]+)\}", text):
                assert name in LIMIT_NAMES | {"Kind", "Scope"}, f"{arg.name}: {{{name}}}"


def test_every_bound_and_default_is_a_number_or_an_integer_limit():
    for arg in every_argument():
        for value in (arg.api.minimum, arg.api.maximum, arg.api.default):
            if isinstance(value, str):
                assert value in LIMIT_NAMES, f"{arg.name}: {value}"
                assert isinstance(getattr(LIMITS, value), int)
        if arg.api.minimum is not None or arg.api.maximum is not None:
            assert arg.held in (int, float), f"{arg.name} is bounded but not a number"


def test_descriptions_fill_in_the_limits_in_force_and_the_enums_as_a_transport_spells_them():
    [limit] = [a for a in arguments(RecallQuery) if a.name == "limit"]
    small = Limits(recall_default=3, recall_max=7)
    assert describe(limit.api, small, lambda v: v.name) == (
        "How many memories to return, best first (default 3, at most 7)."
    )
    [kinds] = [a for a in arguments(MemoryFilter) if a.name == "kinds"]
    assert "TOPICAL: a stable fact" in describe(kinds.api, LIMITS, lambda v: v.name)
    assert "topical: a stable fact" in describe(kinds.api, LIMITS, lambda v: v.value)


def test_agents_words_replace_the_description_only_for_agents():
    [flag] = [a for a in arguments(MemoryFilter) if a.name == "include_invalidated"]
    spell = str
    assert "retired" in describe(flag.api, LIMITS, spell)
    assert "forgotten" in describe(flag.api, LIMITS, spell, agents=True)


def test_a_recall_and_a_context_block_take_the_filter_but_for_what_reads_invalidated_memories():
    names = {a.name for a in arguments(RecallQuery)}
    assert {a.name for a in arguments(MemoryFilter)} - names == {"include_invalidated"}
    assert {"text", "limit", "min_score", "kinds", "categories", "scope"} <= names
    assert {"text", "budget", "kinds"} <= {a.name for a in arguments(ContextQuery)}
    assert requests.refused(RecallQuery) == {"filter": frozenset({"include_invalidated"})}


def test_an_operation_s_arguments_have_one_name_each():
    for parts in [(MemoryFilter, PageRequest), (RecallQuery,), (ContextQuery,), (MemoryRef,)]:
        names = [a.name for a in arguments(*parts)]
        assert len(names) == len(set(names))
    with pytest.raises(TypeError, match="share a name"):
        arguments(MemoryDraft, MemoryRef)
    assert [a.name for a in arguments(less(MemoryDraft, "key", "scope"), MemoryRef)][-3:] == [
        "id",
        "key",
        "scope",
    ]


def test_the_transports_renames_are_one_per_field():
    assert requests.renames("graphql") == {"text": "query", "order": "orderBy"}
    assert requests.renames("mcp") == {"text": "query", "include_invalidated": "include_forgotten"}


def test_build_takes_lists_as_tuples_and_keeps_the_defaults_of_what_is_left_out():
    flt = build(MemoryFilter, {"kinds": [Kind.EPISODIC], "categories": ["work", "home"]})
    assert flt == MemoryFilter(kinds=(Kind.EPISODIC,), categories=("work", "home"))
    assert build(PageRequest, {}) == PageRequest()


def test_build_fills_a_nested_filter_from_the_same_arguments():
    after = datetime(2026, 1, 1, tzinfo=UTC)
    q = build(
        RecallQuery, {"text": "tea", "limit": 3, "scope": Scope.USER, "occurred_after": after}
    )
    assert q == RecallQuery("tea", 3, filter=MemoryFilter(scope=Scope.USER, occurred_after=after))


def test_a_former_name_gives_its_one_value_to_the_list():
    assert build(MemoryFilter, {"kind": Kind.TOPICAL}).kinds == (Kind.TOPICAL,)
    assert build(MemoryFilter, {"category": "work", "kinds": None}).categories == ("work",)


def test_a_field_given_under_both_names_is_refused_naming_the_former():
    with pytest.raises(BadInput) as refused:
        build(MemoryFilter, {"kind": Kind.TOPICAL, "kinds": [Kind.EPISODIC]})
    assert refused.value.extensions == {"argument": "kind"}


def test_the_records_are_frozen_and_their_lists_are_tuples():
    for record in requests.RECORDS:
        assert record.__dataclass_params__.frozen, record  # type: ignore[attr-defined]
    for arg in every_argument():
        assert typing.get_origin(arg.held) is not list, arg.name


def test_an_operations_arguments_and_a_records_hints_are_worked_out_once():
    # every request builds its records: resolving the annotations each time was a tenth of a
    # busy server's time
    page = requests.PageRequest
    first = requests.arguments(requests.MemoryFilter, page)
    assert requests.arguments(requests.MemoryFilter, page) is first
    assert requests.hints_of(requests.MemoryFilter) is requests.hints_of(requests.MemoryFilter)
    with pytest.raises(TypeError):
        requests.hints_of(requests.MemoryFilter)["kinds"] = int  # type: ignore[index]
