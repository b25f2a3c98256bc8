"""`memql.rules.validation`: the input rules every entry point shares. Each rule is a table of
what it keeps (cleaned) and what it refuses, with the message and the field or argument the
refusal names (transports rename those for their callers); then the operations' records: a
draft into a memory to write, a filter into a read's criteria, each number within the bounds
its field states."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from memql.errors import BadInput
from memql.model import Kind, Scope
from memql.requests import ContextQuery, Criteria, MemoryDraft, MemoryFilter, RecallQuery
from memql.rules import validation
from memql.settings import LIMITS, Limits

SMALL = Limits(
    content_chars=10,
    key_chars=5,
    category_chars=6,
    source_thread_ids=2,
    thread_id_chars=4,
    source_bytes=20,
    json_depth=3,
)
NOW = datetime(2026, 1, 1, tzinfo=UTC)
LATER = NOW + timedelta(days=1)
NAIVE = datetime(2026, 1, 1, 12)
# in UTC it falls before year 1: it cannot be compared with another zone's time nor sent
BEFORE_YEAR_ONE = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))


def refused(call: Callable[..., Any], *args: Any, **kwargs: Any) -> BadInput:
    with pytest.raises(BadInput) as caught:
        call(*args, **kwargs)
    return caught.value


def refusal(check: Callable[[], Any]) -> tuple[str, dict[str, Any]]:
    error = refused(check)
    return error.message, error.extensions


@pytest.mark.parametrize(
    ("check", "kept"),
    [
        # content: trimmed, up to its limit
        (lambda: validation.content("  Likes tea. ", SMALL), "Likes tea."),
        (lambda: validation.content(" " + "x" * 10 + " ", SMALL), "x" * 10),
        # key: a slug, trimmed; None is no key
        (lambda: validation.key(" a.b:c ", SMALL), "a.b:c"),
        (lambda: validation.key("0/_-x", SMALL), "0/_-x"),
        (lambda: validation.key(None, SMALL), None),
        # category: `general` when not given, trimmed
        (lambda: validation.category(None, SMALL), "general"),
        (lambda: validation.category(" food ", SMALL), "food"),
        # thread ids: trimmed, duplicates dropped in order
        (lambda: validation.thread_ids([" t1", "t2", "t1 "], SMALL), ("t1", "t2")),
        (lambda: validation.thread_ids((), SMALL), ()),
        # source: a JSON object within its size
        (lambda: validation.source({"a": 1}, SMALL), {"a": 1}),
        (lambda: validation.source(None, SMALL), None),
        # instants: a time without a zone is UTC, one with a zone is kept as given
        (lambda: validation.instant(NAIVE), NAIVE.replace(tzinfo=UTC)),
        (lambda: validation.instant(LATER), LATER),
        (lambda: validation.instant(None), None),
        (lambda: validation.expires_at(LATER, NOW), LATER),
        (lambda: validation.expires_at(None, NOW), None),
        # a range may be open at either end
        (lambda: validation.check_range(NOW, None, field="created"), None),
        (lambda: validation.check_range(None, NOW, field="created"), None),
        (lambda: validation.check_range(NOW, LATER, field="created"), None),
        # counts: the default when not given, else within 1..maximum
        (lambda: validation.bounded(None, 5, 20, field="first"), 5),
        (lambda: validation.bounded(20, 5, 20, field="first"), 20),
        (lambda: validation.bounded(1, 5, 20, field="first"), 1),
        # event cursors: a non-negative integer as text
        (lambda: validation.event_cursor(" 42 "), 42),
        (lambda: validation.event_cursor(str(2**63 - 1)), 2**63 - 1),
        (lambda: validation.event_cursor(None), None),
        # ids
        (
            lambda: validation.parse_id("00000000-0000-0000-0000-000000000001"),
            uuid.UUID(int=1),
        ),
    ],
)
def test_what_each_rule_keeps_and_how_it_cleans_it(check, kept):
    assert check() == kept


@pytest.mark.parametrize(
    ("check", "says", "names"),
    [
        (lambda: validation.content("  \n ", SMALL), "`content` is empty", {"field": "content"}),
        (
            lambda: validation.content("x" * 11, SMALL),
            "`content` has 11 characters; the limit is 10",
            {"field": "content"},
        ),
        (
            lambda: validation.content("", SMALL, field="new_content"),
            "`new_content` is empty",
            {"field": "new_content"},
        ),
        (lambda: validation.key("x" * 6, SMALL), "`key` must be a slug: 1..5", {"field": "key"}),
        (
            lambda: validation.key("-ab", SMALL),
            "starting with a letter or digit",
            {"field": "key"},
        ),
        (lambda: validation.key("a b", SMALL), "`key` must be a slug", {"field": "key"}),
        (lambda: validation.key("", SMALL), "`key` must be a slug", {"field": "key"}),
        (
            lambda: validation.category("  ", SMALL),
            "`category` must be 1..6 characters on one line",
            {"field": "category"},
        ),
        (lambda: validation.category("x" * 7, SMALL), "`category`", {"field": "category"}),
        (lambda: validation.category("a\u2028b", SMALL), "on one line", {"field": "category"}),
        (
            lambda: validation.thread_ids(["a", "b", "c"], SMALL),
            "`source_thread_ids` has 3 ids; the limit is 2",
            {"field": "source_thread_ids"},
        ),
        (
            lambda: validation.thread_ids(["a", " "], SMALL),
            "each of `source_thread_ids` must be 1..4 characters",
            {"field": "source_thread_ids"},
        ),
        (
            lambda: validation.thread_ids(["abcde"], SMALL),
            "each of `source_thread_ids` must be 1..4 characters",
            {"field": "source_thread_ids"},
        ),
        (
            lambda: validation.source(["a"], SMALL),
            "`source` must be a JSON object",
            {"field": "source"},
        ),
        (
            lambda: validation.source({"a": "x" * 20}, SMALL),
            "`source` is larger than 20 bytes",
            {"field": "source"},
        ),
        (
            lambda: validation.expires_at(NOW, NOW),
            "`expires_at` must be in the future",
            {"field": "expires_at"},
        ),
        (
            lambda: validation.expires_at(BEFORE_YEAR_ONE, NOW),
            "`expires_at` is out of range",
            {"field": "expires_at"},
        ),
        (
            lambda: validation.instant(BEFORE_YEAR_ONE, field="occurred_at"),
            "`occurred_at` is out of range: once in UTC it must fall between",
            {"field": "occurred_at"},
        ),
        (
            lambda: validation.check_range(LATER, NOW, field="created"),
            "`created_after` must be earlier than `created_before`",
            {"field": "created_after"},
        ),
        (
            lambda: validation.check_range(NOW, NOW, field="updated"),
            "`updated_after` must be earlier than `updated_before`",
            {"field": "updated_after"},
        ),
        (
            lambda: validation.bounded(0, 5, 20, field="first"),
            "`first` must be between 1 and 20",
            {"field": "first"},
        ),
        (
            lambda: validation.bounded(21, 5, 20, field="first"),
            "`first` must be between 1 and 20",
            {"field": "first"},
        ),
        (
            lambda: validation.event_cursor("-1"),
            "`since` is not an event cursor this API returned",
            {"argument": "since"},
        ),
        (lambda: validation.event_cursor("1.5"), "`since`", {"argument": "since"}),
        # digits of another script are digits to str.isdigit, not to a cursor
        (lambda: validation.event_cursor("\u0663"), "`since`", {"argument": "since"}),
        (lambda: validation.event_cursor(str(2**63)), "`since`", {"argument": "since"}),
        (
            lambda: validation.parse_id("nope"),
            "`id` is not a memory id (a UUID)",
            {"argument": "id"},
        ),
        (
            lambda: validation.parse_id("nope", argument="project", what="project id"),
            "`project` is not a project id (a UUID)",
            {"argument": "project"},
        ),
    ],
)
def test_what_each_rule_refuses_and_the_name_it_gives(check, says, names):
    message, extensions = refusal(check)
    assert says in message
    assert extensions == names


def test_a_draft_is_cleaned_field_by_field():
    raw = MemoryDraft(
        content="  Likes tea. ",
        kind=Kind.TOPICAL,
        key=" k ",
        source_thread_ids=("t", " t"),
        occurred_at=NAIVE,
    )
    assert validation.new_memory(raw, SMALL, NOW) == replace(
        raw,
        content="Likes tea.",
        key="k",
        category="general",
        source_thread_ids=("t",),
        occurred_at=NAIVE.replace(tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"content": " "}, "content"),
        ({"key": "not a slug"}, "key"),
        ({"category": "a\nb"}, "category"),
        ({"source_thread_ids": ("a", "b", "c")}, "source_thread_ids"),
        ({"source": {"long": "x" * 20}}, "source"),
        ({"expires_at": NOW - timedelta(seconds=1)}, "expires_at"),
        ({"occurred_at": BEFORE_YEAR_ONE}, "occurred_at"),
    ],
)
def test_a_draft_is_refused_naming_the_field_that_breaks_a_rule(change, field):
    raw = replace(MemoryDraft(content="Likes tea.", kind=Kind.TOPICAL), **change)
    _, extensions = refusal(lambda: validation.new_memory(raw, SMALL, NOW))
    assert extensions == {"field": field}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("a\x00b", "`f` contains a NUL character, which cannot be stored"),
        ("a\ud800", "`f` contains a lone surrogate (U+D800), which cannot be stored"),
        ({"k": float("nan")}, "`f` holds a number that is not finite (NaN or Infinity)"),
        ({"k": [float("-inf")]}, "not finite"),
        ({"k": 2**63}, "`f` holds an integer beyond 64 bits"),
        ({"k": -(2**63) - 1}, "beyond 64 bits"),
        ({"k\x00": 1}, "a NUL character"),  # keys too
        ({"k": {"k": {"k": {}}}}, "`f` is nested deeper than 3 levels"),
        ({"k": [[[1]]]}, "nested deeper than 3 levels"),
        (float("inf"), "`f` is not a finite number"),
        (BEFORE_YEAR_ONE, "`f` is out of range"),
        ([("ok", "a\x00")], "a NUL character"),  # a sequence of values, each checked
    ],
)
def test_nothing_unstorable_gets_past_the_gate(value, says):
    message, extensions = refusal(lambda: validation.storable(value, field="f", limits=SMALL))
    assert says in message
    assert extensions == {"field": "f"}


@pytest.mark.parametrize(
    "value",
    [
        "a\u2028b \U0001f600",
        {"k": [1, 2.5, True, None, "x", 2**63 - 1, -(2**63)]},
        {"k": {"k": [1]}},  # three levels deep: the limit itself
        1.5,
        NAIVE,
        None,
        (),
    ],
)
def test_storable_values_pass_the_gate(value):
    validation.storable(value, field="f", limits=SMALL)


def test_a_batch_refusal_names_the_input_it_comes_from_by_its_index():
    batch = [MemoryDraft("fine", Kind.TOPICAL), MemoryDraft("bad\x00", Kind.TOPICAL)]
    message, extensions = refusal(lambda: validation.storable(batch, field="inputs"))
    assert message == "input 1: `content` contains a NUL character, which cannot be stored"
    assert extensions == {"field": "content", "index": 1}
    # one save request alone is not a batch: no index
    _, extensions = refusal(lambda: validation.storable([batch[1]], field="inputs"))
    assert extensions == {"field": "content"}


def test_a_method_behind_the_gate_never_runs_with_an_unstorable_argument():
    ran: list[tuple[Any, ...]] = []

    class Service:
        limits = SMALL

        @validation.storable_arguments
        def save(self, principal: object, text: str, *, source: dict[str, Any]) -> str:
            ran.append((principal, text, source))
            return "saved"

    service = Service()
    # the principal is not an argument of the caller's: it is never checked
    assert service.save("\x00principal", "text", source={"a": 1}) == "saved"
    message, extensions = refusal(lambda: service.save("p", "text", source={"a": {"b": {"c": {}}}}))
    assert (message, extensions) == ("`source` is nested deeper than 3 levels", {"field": "source"})
    _, extensions = refusal(lambda: service.save("p", "te\ud800xt", source={}))
    assert extensions == {"field": "text"}
    assert ran == [("\x00principal", "text", {"a": 1})]


# ---- the operations' records: a filter into a read's criteria, each number within the bounds its
# field states, a recall's and a context block's filter of live memories only

SCOPES = (Scope.USER,)


def test_a_filter_s_instants_without_a_zone_are_utc_and_what_admits_all_is_left_out():
    naive = datetime(2026, 3, 1, 12, 0)
    checked = validation.criteria(
        MemoryFilter(kinds=(), categories=(), contains="", occurred_after=naive),
        SCOPES,
        LIMITS,
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
    names = {f.name for f in fields(MemoryFilter)}
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
