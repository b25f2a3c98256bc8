"""The save decision (`memql.rules.saving`), stated as tables: what a save does given the key's
holder and the nearest memories, what it reports, and how a batch is planned to answer as the
same saves one after the other."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memql.model import Kind, Memory, NearDuplicate, Scope
from memql.requests import MemoryDraft, NewMemory
from memql.rules.saving import (
    Absorb,
    Create,
    Decision,
    Earlier,
    Supersede,
    Thresholds,
    decide,
    plan_batch,
)
from tests import factories

THRESHOLDS = Thresholds(absorb=0.95, near_duplicate=0.80, reported=3, source_thread_ids=3)
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
APRIL_1 = datetime(2026, 4, 1, tzinfo=UTC)
APRIL_8 = datetime(2026, 4, 8, tzinfo=UTC)

TOPICAL, EPISODIC, OPERATIONAL = Kind.TOPICAL, Kind.EPISODIC, Kind.OPERATIONAL


def stored(content: str, kind: Kind = TOPICAL, **fields: Any) -> Memory:
    return replace(factories.memory(content, kind), **fields)


def new(content: str, kind: Kind = TOPICAL, **fields: Any) -> NewMemory:
    return NewMemory(MemoryDraft(content, kind, **fields))


def near(content: str, similarity: float, kind: Kind = TOPICAL, **fields: Any) -> NearDuplicate:
    return NearDuplicate(stored(content, kind, **fields), similarity)


def outcome(decision: Decision[NearDuplicate], candidates: list[NearDuplicate]) -> tuple[Any, ...]:
    """A decision as the table states it, candidates by their position."""
    at = [next(i for i, c in enumerate(candidates) if c is d) for d in decision.near_duplicates]
    if isinstance(decision, Absorb):
        target = next(i for i, c in enumerate(candidates) if c is decision.target)
        return ("absorb", target, at)
    if isinstance(decision, Supersede):
        return ("supersede", at)
    return ("create", at)


@dataclass(frozen=True)
class Row:
    save: NewMemory
    candidates: list[NearDuplicate]
    expected: tuple[Any, ...]


# A save without a key: absorbed into the first near-duplicate it reports that has its kind and
# event time and says the same thing (dedup.may_absorb); otherwise created. Either way it reports
# the near-duplicates (the bar, or a contradiction from a lower one), most similar first.
WITHOUT_A_KEY = {
    "nothing stored is created and reports nothing": Row(
        new("Drinks oat milk."), [], ("create", [])
    ),
    "the same text of the same kind is absorbed": Row(
        new("Drinks oat milk."), [near("Drinks oat milk.", 1.0)], ("absorb", 0, [])
    ),
    "the same text up to case, spacing and final punctuation is absorbed": Row(
        new("drinks  oat milk"), [near("Drinks oat milk.", 0.97)], ("absorb", 0, [])
    ),
    "the same text under another kind is created and reported": Row(
        new("Review the release checklist.", OPERATIONAL),
        [near("Review the release checklist.", 1.0, TOPICAL)],
        ("create", [0]),
    ),
    "a paraphrase from the absorb threshold up is absorbed": Row(
        new("Has a dog called Biscuit."),
        [near("Has a dog named Biscuit.", 0.96)],
        ("absorb", 0, []),
    ),
    "a paraphrase between the two bars is created and reported": Row(
        new("Has a dog called Biscuit."), [near("Has a dog named Biscuit.", 0.90)], ("create", [0])
    ),
    "other numbers or dates are created and reported, however similar": Row(
        new("Meeting with Anna on 2026-03-09."),
        [near("Meeting with Anna on 2026-03-02.", 0.997)],
        ("create", [0]),
    ),
    "a reversed comparison is created and reported": Row(
        new("Prefers phone calls over email."),
        [near("Prefers email over phone calls.", 0.98)],
        ("create", [0]),
    ),
    "a word against its opposite is created and reported": Row(
        new("Prefers long answers."), [near("Prefers short answers.", 0.97)], ("create", [0])
    ),
    "a negation is never absorbed, however similar": Row(
        new("No longer likes tea."), [near("Likes tea.", 0.99)], ("create", [0])
    ),
    "a negation is reported from below the near-duplicate bar": Row(
        new("No longer likes tea."), [near("Likes tea.", 0.70)], ("create", [0])
    ),
    "a negation below the contradiction floor is not reported": Row(
        new("No longer likes tea."), [near("Likes tea.", 0.59)], ("create", [])
    ),
    "below the near-duplicate bar, the same polarity is not reported": Row(
        new("Likes green tea."), [near("Likes tea.", 0.79)], ("create", [])
    ),
    # event time
    "the same words at the same event time are absorbed": Row(
        new("Went to the climbing gym.", EPISODIC, occurred_at=APRIL_8),
        [near("Went to the climbing gym.", 1.0, EPISODIC, occurred_at=APRIL_8)],
        ("absorb", 0, []),
    ),
    "the same words at another event time are created and reported": Row(
        new("Went to the climbing gym.", EPISODIC, occurred_at=APRIL_8),
        [near("Went to the climbing gym.", 1.0, EPISODIC, occurred_at=APRIL_1)],
        ("create", [0]),
    ),
    "a dated save is not absorbed into an undated memory": Row(
        new("Went to the climbing gym.", EPISODIC, occurred_at=APRIL_8),
        [near("Went to the climbing gym.", 1.0, EPISODIC)],
        ("create", [0]),
    ),
    "an undated save is not absorbed into a dated memory": Row(
        new("Went to the climbing gym.", EPISODIC),
        [near("Went to the climbing gym.", 1.0, EPISODIC, occurred_at=APRIL_8)],
        ("create", [0]),
    ),
    # which near-duplicate absorbs, and what the save reports
    "the target may be a less similar near-duplicate; the more similar is reported": Row(
        new("Drinks oat milk."),
        [near("Drinks oat milk.", 1.0, OPERATIONAL), near("Drinks oat milk.", 0.99)],
        ("absorb", 1, [0]),
    ),
    "the most similar absorbs; the other near-duplicates are reported": Row(
        new("Drinks oat milk."),
        [near("Drinks oat milk.", 1.0), near("Drinks oat milk.", 0.99), near("Likes milk.", 0.85)],
        ("absorb", 0, [1, 2]),
    ),
    "at most `reported` near-duplicates are reported, the most similar": Row(
        new("Ticket ACME-40 is blocked."),
        [near(f"Ticket ACME-4{i} is blocked.", 0.99 - i / 100) for i in range(1, 6)],
        ("create", [0, 1, 2]),
    ),
    "the target is among those reported: a fourth near-duplicate does not absorb": Row(
        new("Ticket ACME-40 is blocked."),
        [near(f"Ticket ACME-4{i} is blocked.", 0.99 - i / 100) for i in range(1, 4)]
        + [near("Ticket ACME-40 is blocked.", 0.95)],
        ("create", [0, 1, 2]),
    ),
    "only the `searched` nearest are compared: a contradiction past them is not reported": Row(
        new("No longer likes tea."),
        [near(f"Never drinks coffee (cup {i}).", 0.75) for i in range(1, 7)]
        + [near("Likes tea.", 0.70)],
        ("create", []),
    ),
}


@pytest.mark.parametrize("row", WITHOUT_A_KEY.values(), ids=WITHOUT_A_KEY.keys())
def test_a_save_without_a_key(row: Row):
    decision = decide(row.save, None, row.candidates, THRESHOLDS)
    assert outcome(decision, row.candidates) == row.expected


HOLDER = stored("Prefers email for status updates.", key="contact-channel")
KEYED = new("Prefers Slack for status updates.", key="contact-channel")
SAME_TEXT = [near("Prefers Slack for status updates.", 1.0)]


@pytest.mark.parametrize(
    ("holder", "candidates", "expected"),
    [
        pytest.param(HOLDER, SAME_TEXT, ("supersede", [0]), id="a live holder is superseded"),
        pytest.param(
            replace(HOLDER, expires_at=NOW + timedelta(seconds=1)),
            SAME_TEXT,
            ("supersede", [0]),
            id="a holder that expires later is live and superseded",
        ),
        pytest.param(
            replace(HOLDER, expires_at=NOW),
            SAME_TEXT,
            ("create", [0]),
            id="a holder expired by now: the save is created and the holder marked expired",
        ),
        pytest.param(
            None,
            SAME_TEXT,
            ("create", [0]),
            id="a key nothing holds: created, never absorbed, and the same text reported",
        ),
    ],
)
def test_a_save_with_a_key(holder: Memory | None, candidates: list[NearDuplicate], expected):
    decision = decide(KEYED, holder, candidates, THRESHOLDS, NOW)
    assert outcome(decision, candidates) == expected
    if isinstance(decision, Supersede):
        assert decision.old is holder
    if isinstance(decision, Create):
        assert decision.expired is holder


@pytest.mark.parametrize(
    ("memory_pinned", "save_pinned", "pinned"),
    [(False, False, False), (False, True, True), (True, False, True), (True, True, True)],
)
def test_an_absorbed_memory_is_pinned_when_it_or_the_save_is(memory_pinned, save_pinned, pinned):
    candidates = [near("Drinks oat milk.", 1.0, pinned=memory_pinned)]
    decision = decide(new("Drinks oat milk.", pinned=save_pinned), None, candidates, THRESHOLDS)
    assert isinstance(decision, Absorb)
    assert decision.pinned is pinned


@pytest.mark.parametrize(
    ("kept", "said", "merged"),
    [
        pytest.param((), (), (), id="none"),
        pytest.param(("t1",), ("t2",), ("t1", "t2"), id="the save's after the memory's"),
        pytest.param(("t1", "t2"), ("t2", "t1"), ("t1", "t2"), id="each once, first place kept"),
        pytest.param(("t1", "t2"), ("t3", "t4"), ("t2", "t3", "t4"), id="over the cap the newest"),
    ],
)
def test_an_absorbed_memory_keeps_the_thread_ids_of_both(kept, said, merged):
    candidates = [near("Drinks oat milk.", 1.0, source_thread_ids=kept)]
    save = new("Drinks oat milk.", source_thread_ids=said)
    decision = decide(save, None, candidates, THRESHOLDS)
    assert isinstance(decision, Absorb)
    assert decision.source_thread_ids == merged


def test_a_holder_is_given_only_for_a_save_with_a_key_and_with_the_time():
    with pytest.raises(ValueError, match="names a key"):
        decide(new("Prefers Slack."), HOLDER, [], THRESHOLDS, NOW)
    with pytest.raises(ValueError, match="now"):
        decide(KEYED, HOLDER, [], THRESHOLDS)


# --- a batch --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """An input or a stored memory of a batch scenario, with the angle of its (2-d) embedding."""

    content: str
    degrees: float
    kind: Kind = TOPICAL
    scope: Scope = Scope.USER
    occurred_at: datetime | None = None

    def cosine(self, other: Sample) -> float:
        return math.cos(math.radians(self.degrees - other.degrees))


def one_by_one(before: list[Sample], inputs: list[Sample]) -> list[Decision[Any]]:
    """Each input decided as `service/saving.py` saves it alone, after the inputs before it: its
    candidates are every live memory of its scope (stored, or created by an earlier input) from
    the floor up, most similar first, the older first among equals."""
    live: list[tuple[Sample, Memory | NewMemory]] = [
        (s, stored(s.content, s.kind, scope=s.scope, occurred_at=s.occurred_at)) for s in before
    ]
    decisions: list[Decision[Any]] = []
    for said in inputs:
        ranked = sorted(
            (
                (min(1.0, said.cosine(s)), age, Seen(m, min(1.0, said.cosine(s))))
                for age, (s, m) in enumerate(live)
                if s.scope is said.scope and said.cosine(s) >= THRESHOLDS.floor
            ),
            key=lambda r: (-r[0], r[1]),
        )
        decision = decide(as_new(said), None, [c for _, _, c in ranked], THRESHOLDS)
        decisions.append(decision)
        if isinstance(decision, Create):
            live.append((said, as_new(said)))
    return decisions


@dataclass(frozen=True)
class Seen:
    """A live memory as a save alone compares with it."""

    memory: Memory | NewMemory
    similarity: float


def as_new(said: Sample) -> NewMemory:
    return new(said.content, said.kind, scope=said.scope, occurred_at=said.occurred_at)


def planned(before: list[Sample], inputs: list[Sample]) -> list[tuple[Any, ...]] | None:
    """`plan_batch` given what `service/saving.py` reads: each input's nearest stored memories
    and the similarities between the inputs."""
    memories = [stored(s.content, s.kind, scope=s.scope, occurred_at=s.occurred_at) for s in before]
    nearest = [
        sorted(
            (
                NearDuplicate(m, min(1.0, i.cosine(s)))
                for s, m in zip(before, memories, strict=True)
                if s.scope is i.scope and i.cosine(s) >= THRESHOLDS.floor
            ),
            key=lambda d: -d.similarity,
        )[: THRESHOLDS.searched]
        for i in inputs
    ]
    similarity = [[j.cosine(i) for i in inputs] for j in inputs]
    return plan_batch([as_new(i) for i in inputs], nearest, similarity, THRESHOLDS)


def contents(near_duplicates: tuple[Any, ...]) -> list[tuple[str, float]]:
    return [(d.memory.content, round(d.similarity, 4)) for d in near_duplicates]


STORED = Sample("Prefers concise status updates (note 1).", 0)
BATCHES = {
    "nothing alike: all created, nothing reported": (
        [],
        [Sample("Likes coffee.", 0), Sample("Owns a bike.", 90)],
        ["create", "create"],
    ),
    "an earlier input is a near-duplicate of a later one, as a stored memory is": (
        [STORED],
        [
            Sample("Prefers concise status updates (note 2).", 10),
            Sample("Prefers concise status updates (note 3).", 15),
        ],
        ["create", "create"],
    ),
    "an earlier input that absorbs a later one: the batch is not planned": (
        [],
        [Sample("Works from the Lisbon office.", 0), Sample("Works from the Lisbon office.", 0)],
        ["create", "absorb"],
    ),
    "a stored memory that absorbs an input: the batch is not planned": (
        [Sample("Drinks oat milk.", 0)],
        [Sample("Owns a bike.", 90), Sample("Drinks oat milk.", 0)],
        ["create", "absorb"],
    ),
    "the same text in the other scope is neither absorbed nor reported": (
        [],
        [
            Sample("Deploys run on Tuesdays.", 0),
            Sample("Deploys run on Tuesdays.", 0, scope=Scope.PROJECT),
        ],
        ["create", "create"],
    ),
    "the same text under another kind is reported, not absorbed": (
        [],
        [Sample("Review the checklist.", 0), Sample("Review the checklist.", 0, kind=OPERATIONAL)],
        ["create", "create"],
    ),
    "the same words at two event times are two memories": (
        [],
        [
            Sample("Went climbing.", 0, EPISODIC, occurred_at=APRIL_1),
            Sample("Went climbing.", 0, EPISODIC, occurred_at=APRIL_8),
        ],
        ["create", "create"],
    ),
    "a stored memory and an earlier input equally similar: the stored one first": (
        [Sample("Ticket ACME-41 is blocked.", 20)],
        [Sample("Ticket ACME-42 is blocked.", 40), Sample("Ticket ACME-43 is blocked.", 30)],
        ["create", "create"],
    ),
    "a contradiction among the inputs is reported from below the near-duplicate bar": (
        [],
        [Sample("Likes tea.", 0), Sample("No longer likes tea.", 45)],
        ["create", "create"],
    ),
    "more alike than are reported: the most similar, stored or earlier": (
        [Sample(f"Ticket ACME-1{i} is blocked.", 2 * i) for i in range(4)],
        [Sample(f"Ticket ACME-2{i} is blocked.", 1 + 2 * i) for i in range(5)],
        ["create"] * 5,
    ),
}


@pytest.mark.parametrize(("before", "inputs", "outcomes"), BATCHES.values(), ids=BATCHES.keys())
def test_a_batch_answers_as_the_same_saves_one_after_the_other(before, inputs, outcomes):
    expected = one_by_one(before, inputs)
    assert [type(d).__name__.lower() for d in expected] == outcomes
    plans = planned(before, inputs)
    if "absorb" in outcomes:
        assert plans is None
        return
    assert plans is not None
    assert [contents(p) for p in plans] == [contents(d.near_duplicates) for d in expected]


def test_a_batch_reports_an_earlier_input_by_its_index():
    inputs = [Sample("Ticket ACME-1 is blocked.", 0), Sample("Ticket ACME-2 is blocked.", 10)]
    plans = planned([], inputs)
    assert plans is not None
    [earlier] = plans[1]
    assert isinstance(earlier, Earlier)
    assert (earlier.index, earlier.similarity) == (0, pytest.approx(math.cos(math.radians(10))))
    assert plans[0] == ()


def test_a_similarity_above_one_from_rounding_is_reported_as_one():
    save = [new("Ticket ACME-1 is blocked."), new("Ticket ACME-2 is blocked.")]
    plans = plan_batch(save, [[], []], [[1.0, 1.0000002], [1.0000002, 1.0]], THRESHOLDS)
    assert plans is not None
    assert [d.similarity for d in plans[1]] == [1.0]


def test_a_batch_naming_a_key_is_not_planned():
    with pytest.raises(ValueError, match="key"):
        plan_batch([new("a"), new("b", key="k")], [[], []], [[1, 0], [0, 1]], THRESHOLDS)
