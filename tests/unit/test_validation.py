"""`memql.rules.validation`: the input rules every entry point shares. Each rule is a table of
what it keeps (cleaned) and what it refuses, with the message and the field or argument the
refusal names (transports rename those for their callers)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from memql.errors import BadInput
from memql.model import Kind, NewMemory, TimeRange
from memql.rules import validation
from memql.settings import Limits

LIMITS = Limits(
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


def refusal(check: Callable[[], Any]) -> tuple[str, dict[str, Any]]:
    with pytest.raises(BadInput) as refused:
        check()
    return refused.value.message, refused.value.extensions


@pytest.mark.parametrize(
    ("check", "kept"),
    [
        # content: trimmed, up to its limit
        (lambda: validation.content("  Likes tea. ", LIMITS), "Likes tea."),
        (lambda: validation.content(" " + "x" * 10 + " ", LIMITS), "x" * 10),
        # key: a slug, trimmed; None is no key
        (lambda: validation.key(" a.b:c ", LIMITS), "a.b:c"),
        (lambda: validation.key("0/_-x", LIMITS), "0/_-x"),
        (lambda: validation.key(None, LIMITS), None),
        # category: `general` when not given, trimmed
        (lambda: validation.category(None, LIMITS), "general"),
        (lambda: validation.category(" food ", LIMITS), "food"),
        # thread ids: trimmed, duplicates dropped in order
        (lambda: validation.thread_ids([" t1", "t2", "t1 "], LIMITS), ("t1", "t2")),
        (lambda: validation.thread_ids((), LIMITS), ()),
        # source: a JSON object within its size
        (lambda: validation.source({"a": 1}, LIMITS), {"a": 1}),
        (lambda: validation.source(None, LIMITS), None),
        # instants: a time without a zone is UTC, one with a zone is kept as given
        (lambda: validation.instant(NAIVE), NAIVE.replace(tzinfo=UTC)),
        (lambda: validation.instant(LATER), LATER),
        (lambda: validation.instant(None), None),
        (lambda: validation.expires_at(LATER, NOW), LATER),
        (lambda: validation.expires_at(None, NOW), None),
        # a range may be open at either end
        (
            lambda: validation.time_range(NOW, None, field="created"),
            TimeRange(NOW, None),
        ),
        (
            lambda: validation.time_range(NAIVE, LATER, field="created"),
            TimeRange(NAIVE.replace(tzinfo=UTC), LATER),
        ),
        # counts: the default when not given, else within 1..maximum
        (lambda: validation.bounded(None, 5, 20, field="first"), 5),
        (lambda: validation.bounded(20, 5, 20, field="first"), 20),
        (lambda: validation.bounded(1, 5, 20, field="first"), 1),
        # scores: 0 (no bound) when not given
        (lambda: validation.score(None, field="min_score"), 0.0),
        (lambda: validation.score(1.0, field="min_score"), 1.0),
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
        (lambda: validation.content("  \n ", LIMITS), "`content` is empty", {"field": "content"}),
        (
            lambda: validation.content("x" * 11, LIMITS),
            "`content` has 11 characters; the limit is 10",
            {"field": "content"},
        ),
        (
            lambda: validation.content("", LIMITS, field="new_content"),
            "`new_content` is empty",
            {"field": "new_content"},
        ),
        (lambda: validation.key("x" * 6, LIMITS), "`key` must be a slug: 1..5", {"field": "key"}),
        (
            lambda: validation.key("-ab", LIMITS),
            "starting with a letter or digit",
            {"field": "key"},
        ),
        (lambda: validation.key("a b", LIMITS), "`key` must be a slug", {"field": "key"}),
        (lambda: validation.key("", LIMITS), "`key` must be a slug", {"field": "key"}),
        (
            lambda: validation.category("  ", LIMITS),
            "`category` must be 1..6 characters on one line",
            {"field": "category"},
        ),
        (lambda: validation.category("x" * 7, LIMITS), "`category`", {"field": "category"}),
        (lambda: validation.category("a\u2028b", LIMITS), "on one line", {"field": "category"}),
        (
            lambda: validation.thread_ids(["a", "b", "c"], LIMITS),
            "`source_thread_ids` has 3 ids; the limit is 2",
            {"field": "source_thread_ids"},
        ),
        (
            lambda: validation.thread_ids(["a", " "], LIMITS),
            "each of `source_thread_ids` must be 1..4 characters",
            {"field": "source_thread_ids"},
        ),
        (
            lambda: validation.thread_ids(["abcde"], LIMITS),
            "each of `source_thread_ids` must be 1..4 characters",
            {"field": "source_thread_ids"},
        ),
        (
            lambda: validation.source(["a"], LIMITS),
            "`source` must be a JSON object",
            {"field": "source"},
        ),
        (
            lambda: validation.source({"a": "x" * 20}, LIMITS),
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
            lambda: validation.time_range(LATER, NOW, field="created"),
            "`created_after` must be earlier than `created_before`",
            {"field": "created_after"},
        ),
        (
            lambda: validation.time_range(NOW, NOW, field="updated"),
            "`updated_after` must be earlier than `updated_before`",
            {"field": "updated_after"},
        ),
        (
            lambda: validation.time_range(None, BEFORE_YEAR_ONE, field="occurred"),
            "`occurred_before` is out of range",
            {"field": "occurred_before"},
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
            lambda: validation.score(-0.1, field="min_score"),
            "`min_score` must be between 0 and 1",
            {"field": "min_score"},
        ),
        (
            lambda: validation.score(1.5, field="min_score"),
            "`min_score` must be between 0 and 1",
            {"field": "min_score"},
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


def test_a_save_request_is_cleaned_field_by_field():
    raw = NewMemory(
        content="  Likes tea. ",
        kind=Kind.TOPICAL,
        key=" k ",
        source_thread_ids=("t", " t"),
        occurred_at=NAIVE,
    )
    assert validation.new_memory(raw, LIMITS, NOW) == replace(
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
def test_a_save_request_is_refused_naming_the_field_that_breaks_a_rule(change, field):
    raw = replace(NewMemory(content="Likes tea.", kind=Kind.TOPICAL), **change)
    _, extensions = refusal(lambda: validation.new_memory(raw, LIMITS, NOW))
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
    message, extensions = refusal(lambda: validation.storable(value, field="f", limits=LIMITS))
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
    validation.storable(value, field="f", limits=LIMITS)


def test_a_batch_refusal_names_the_input_it_comes_from_by_its_index():
    batch = [NewMemory("fine", Kind.TOPICAL), NewMemory("bad\x00", Kind.TOPICAL)]
    message, extensions = refusal(lambda: validation.storable(batch, field="inputs"))
    assert message == "input 1: `content` contains a NUL character, which cannot be stored"
    assert extensions == {"field": "content", "index": 1}
    # one save request alone is not a batch: no index
    _, extensions = refusal(lambda: validation.storable([batch[1]], field="inputs"))
    assert extensions == {"field": "content"}


def test_a_method_behind_the_gate_never_runs_with_an_unstorable_argument():
    ran: list[tuple[Any, ...]] = []

    class Service:
        limits = LIMITS

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
