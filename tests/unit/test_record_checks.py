"""Checking the operations' records (rules/validation.py, rules/pagination.py): a draft into a
memory to write, a filter into a read's criteria, a page request into a window, each number
within the bounds its field states."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memql.errors import BadInput
from memql.model import Kind, Order, OrderField, Scope, SortDirection
from memql.requests import (
    ContextQuery,
    Criteria,
    MemoryDraft,
    MemoryFilter,
    PageRequest,
    RecallQuery,
)
from memql.rules import pagination, validation
from memql.settings import LIMITS, Limits
from tests.factories import memory

SCOPES = (Scope.USER,)


def refused(call, *args, **kwargs) -> BadInput:
    with pytest.raises(BadInput) as caught:
        call(*args, **kwargs)
    return caught.value


def test_a_filter_s_instants_without_a_zone_are_utc_and_what_admits_all_is_left_out():
    naive = datetime(2026, 3, 1, 12, 0)
    checked = validation.criteria(
        MemoryFilter(kinds=(), categories=(), contains="", occurred_after=naive), SCOPES, LIMITS
    )
    assert checked == Criteria(SCOPES, MemoryFilter(occurred_after=naive.replace(tzinfo=UTC)))


def test_every_time_range_of_the_filter_must_not_be_empty():
    at = datetime(2026, 3, 1, tzinfo=UTC)
    for name in ("occurred", "created", "updated"):
        flt = MemoryFilter(**{f"{name}_after": at, f"{name}_before": at})
        error = refused(validation.criteria, flt, SCOPES, LIMITS)
        assert error.extensions == {"field": f"{name}_after"}
    later = MemoryFilter(created_after=at, created_before=at + timedelta(seconds=1))
    assert validation.criteria(later, SCOPES, LIMITS).filter == later


def test_each_time_bound_of_the_filter_has_its_other_end():
    names = {f.name for f in dataclasses.fields(MemoryFilter)}
    for name in names:
        if name.endswith("_after"):
            assert name.replace("_after", "_before") in names


def test_an_instant_beyond_utc_s_range_is_refused_naming_its_field():
    far = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    error = refused(validation.criteria, MemoryFilter(updated_before=far), SCOPES, LIMITS)
    assert error.extensions == {"field": "updated_before"}


def test_a_source_filter_is_a_json_object_within_its_limit():
    error = refused(validation.criteria, MemoryFilter(source=["a"]), SCOPES, LIMITS)  # type: ignore[arg-type]
    assert error.extensions == {"field": "source"}
    small = Limits(source_bytes=10)
    error = refused(validation.criteria, MemoryFilter(source={"tool": "slack!"}), SCOPES, small)
    assert "10 bytes" in error.message


def test_a_number_takes_the_default_and_the_bounds_its_field_names_from_the_limits_in_force():
    small = Limits(recall_default=2, recall_max=3)
    assert validation.number(RecallQuery("tea"), "limit", small) == 2
    assert validation.number(RecallQuery("tea", limit=3), "limit", small) == 3
    error = refused(validation.number, RecallQuery("tea", limit=4), "limit", small)
    assert (error.message, error.extensions) == (
        "`limit` must be between 1 and 3",
        {"field": "limit"},
    )
    assert refused(validation.number, RecallQuery("tea", limit=0), "limit", small)
    assert validation.number(RecallQuery("tea"), "min_score", small, absent=0.0) == 0.0
    error = refused(validation.number, RecallQuery("tea", min_score=1.5), "min_score", small)
    assert error.message == "`min_score` must be between 0 and 1"
    assert refused(
        validation.number, RecallQuery("tea", min_score=float("nan")), "min_score", small
    )
    assert validation.number(ContextQuery(), "budget", LIMITS) == LIMITS.context_budget


def test_recall_and_the_context_block_refuse_a_filter_that_includes_invalidated_versions():
    everything = MemoryFilter(include_invalidated=True)
    for query in (RecallQuery("tea", filter=everything), ContextQuery(filter=everything)):
        error = refused(validation.live_only, query)
        assert error.extensions == {"field": "include_invalidated"}
    validation.live_only(RecallQuery("tea", filter=MemoryFilter(pinned=True)))


def test_a_draft_becomes_a_memory_to_write_trimmed_with_its_category():
    new = validation.new_memory(MemoryDraft("  Prefers tea.  ", Kind.TOPICAL), LIMITS)
    assert (new.content, new.category, new.kind) == ("Prefers tea.", "general", Kind.TOPICAL)
    error = refused(validation.new_memory, MemoryDraft("x", Kind.TOPICAL, key="not a slug"), LIMITS)
    assert error.extensions == {"field": "key"}


def test_a_page_takes_first_or_last_within_the_list_s_bounds():
    assert pagination.window(PageRequest(), LIMITS) == pagination.Window(
        Order(), LIMITS.list_default
    )
    assert pagination.window(PageRequest(last=3), LIMITS).from_end
    error = refused(pagination.window, PageRequest(first=2, last=2), LIMITS)
    assert error.extensions == {"argument": "last"}
    error = refused(pagination.window, PageRequest(first=LIMITS.list_max + 1), LIMITS)
    assert error.extensions == {"field": "first"}
    assert refused(pagination.window, PageRequest(last=0), LIMITS).extensions == {"field": "last"}


def test_a_page_s_cursors_are_positions_in_its_own_order():
    m = memory("Prefers tea.")
    newest = Order()
    cursor = pagination.encode(m, newest)
    window = pagination.window(PageRequest(after=cursor), LIMITS)
    assert window.after == pagination.Position(m.created_at, m.id)
    updated = Order(OrderField.UPDATED_AT, SortDirection.ASC)
    error = refused(pagination.window, PageRequest(before=cursor, order=updated), LIMITS)
    assert error.extensions == {"argument": "before"}
    assert refused(pagination.window, PageRequest(after=str(uuid.uuid4())), LIMITS)
