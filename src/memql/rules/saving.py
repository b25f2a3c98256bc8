"""What a save does, decided from what is stored. Pure.

A save supersedes the live memory that holds its key; otherwise it is absorbed into a
near-duplicate of the same kind and event time that says the same thing (`dedup.may_absorb`);
otherwise it is created. Each answer carries the near-duplicates the save reports, so the caller
can supersede one instead. `service/saving.py` reads the key's holder and the nearest memories
under the owner's lock, asks `decide`, and writes the answer. `plan_batch` answers for a whole
batch at once, when every input would be created.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from memql.model import Kind, Memory, NearDuplicate, Scope
from memql.requests import NewMemory
from memql.rules import dedup


class Said(Protocol):
    """What a save is compared with: a stored memory, or an earlier input of its batch."""

    @property
    def content(self) -> str: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def occurred_at(self) -> datetime | None: ...
    @property
    def pinned(self) -> bool: ...
    @property
    def source_thread_ids(self) -> tuple[str, ...]: ...


class Candidate(Protocol):
    """Something said before, with the cosine similarity of its embedding to the save's."""

    @property
    def memory(self) -> Said: ...
    @property
    def similarity(self) -> float: ...


C = TypeVar("C", bound=Candidate)


@dataclass(frozen=True)
class Thresholds:
    """The bars a save is decided by, and the caps on what it reports and keeps."""

    # similarity from which a same-kind save with the same literals is absorbed
    absorb: float
    # similarity from which a memory is reported as a near-duplicate
    near_duplicate: float
    # near-duplicates a save reports at most
    reported: int
    # thread ids a memory keeps when it absorbs saves (the newest)
    source_thread_ids: int

    @property
    def floor(self) -> float:
        """The lowest similarity worth searching from: a contradiction is reported from below the
        near-duplicate bar (`dedup.CONTRADICTION_FLOOR`)."""
        return min(self.near_duplicate, dedup.CONTRADICTION_FLOOR)

    @property
    def searched(self) -> int:
        """How many of the nearest memories a save is compared with: twice what it reports, since
        some of those above the floor are neither above the bar nor contradictions."""
        return 2 * self.reported


@dataclass(frozen=True)
class Supersede(Generic[C]):
    """The save's key is held by a live memory: `old` is retired as superseded and the save
    becomes its next version."""

    old: Memory
    near_duplicates: tuple[C, ...]


@dataclass(frozen=True)
class Absorb(Generic[C]):
    """`target` says the same thing: the save is folded into it, which keeps `source_thread_ids`
    and is pinned if either was. `near_duplicates` are the others the save reports."""

    target: C
    near_duplicates: tuple[C, ...]
    source_thread_ids: tuple[str, ...]
    pinned: bool


@dataclass(frozen=True)
class Create(Generic[C]):
    """The save is a new memory. `expired` is the holder of its key when that has expired: it is
    marked expired (at its expiry) before the save takes the key."""

    near_duplicates: tuple[C, ...]
    expired: Memory | None = None


Decision = Supersede[C] | Absorb[C] | Create[C]


def decide(
    new: NewMemory,
    key_holder: Memory | None,
    candidates: Sequence[C],
    thresholds: Thresholds,
    now: datetime | None = None,
) -> Decision[C]:
    """What saving `new` does.

    `key_holder` is the memory of the save's owner and scope that holds `new.key` and is neither
    retired nor superseded (it may have expired by `now`, which is needed with a holder).
    `candidates` are the memories of the same owner and scope nearest to the save, most similar
    first, without the key's holder; only the first `thresholds.searched` count.
    """
    if key_holder is not None and new.key is None:
        raise ValueError("a key's holder is given only for a save that names a key")
    reported = near_duplicates(new, candidates, thresholds)
    if key_holder is not None:
        if now is None:
            raise ValueError("whether a key's holder has expired depends on `now`")
        if key_holder.effective_invalidation(now)[0] is None:
            return Supersede(key_holder, reported)
        return Create(reported, expired=key_holder)
    if new.key is not None:
        # a key names one memory: a save under a key that nothing holds is new
        return Create(reported)
    for target in reported:
        if absorbs(target.memory, new, target.similarity, thresholds.absorb):
            merged = tuple(dict.fromkeys(target.memory.source_thread_ids + new.source_thread_ids))
            return Absorb(
                target,
                tuple(c for c in reported if c is not target),
                # over the cap, the newest provenance wins
                source_thread_ids=merged[-thresholds.source_thread_ids :],
                pinned=target.memory.pinned or new.pinned,
            )
    return Create(reported)


def near_duplicates(new: Said, candidates: Sequence[C], thresholds: Thresholds) -> tuple[C, ...]:
    """The candidates a save of `new` reports, most similar first: of the `searched` nearest,
    those from the near-duplicate bar up and those it seems to contradict from a lower bar (a
    negation moves a sentence's embedding a long way; `reports`), at most `reported` of them."""
    bar = thresholds.near_duplicate
    return tuple(
        c for c in candidates[: thresholds.searched] if reports(c.memory, new, c.similarity, bar)
    )[: thresholds.reported]


def reports(earlier: Said, new: Said, similarity: float, bar: float) -> bool:
    """Whether a save of `new` reports `earlier` as a near-duplicate: from the bar up, or from
    `dedup.CONTRADICTION_FLOOR` up when it seems to contradict it."""
    return similarity >= bar or dedup.contradicts(earlier.content, new.content, similarity)


def absorbs(earlier: Said, new: Said, similarity: float, threshold: float) -> bool:
    """Whether a save of `new` is folded into `earlier`: the same kind, the same event time,
    and the same thing said (`dedup.may_absorb`)."""
    return (
        earlier.kind is new.kind
        # two dated events are two events, however alike their words
        and earlier.occurred_at == new.occurred_at
        and dedup.may_absorb(earlier.content, new.content, similarity, threshold)
    )


@dataclass(frozen=True)
class Earlier:
    """An earlier input of a batch, as a later input is compared with it (saved one after the
    other, it would be stored by then)."""

    index: int
    memory: NewMemory
    similarity: float


def plan_batch(
    news: Sequence[NewMemory],
    stored: Sequence[Sequence[NearDuplicate]],
    similarity: Sequence[Sequence[float]],
    thresholds: Thresholds,
) -> list[tuple[NearDuplicate | Earlier, ...]] | None:
    """The near-duplicates each input of a batch reports when every input is created, as saving
    the inputs one after the other would report them; None when some input would be absorbed,
    by a stored memory or by an earlier input.

    No input names a key (a key's holder is read, and superseded, one save at a time).
    `stored[j]` are the stored memories nearest to input `j`, as `decide` takes its candidates;
    `similarity[j][i]` is the cosine similarity of inputs `j` and `i`. An input is compared with
    the earlier inputs of its own scope, the stored memories first among equals.
    """
    if any(n.key is not None for n in news):
        raise ValueError("a batch is planned only when no input names a key")
    floor = thresholds.floor
    scopes = [n.scope or Scope.USER for n in news]
    plans: list[tuple[NearDuplicate | Earlier, ...]] = []
    for j, new in enumerate(news):
        candidates: list[NearDuplicate | Earlier] = [*stored[j]]
        candidates += [
            Earlier(i, news[i], min(1.0, sim))
            for i, sim in enumerate(similarity[j][:j])
            if sim >= floor and scopes[i] is scopes[j]
        ]
        # stable: the stored first among equals (they were created before the batch), the
        # earlier inputs in their order
        candidates.sort(key=lambda c: (-c.similarity, isinstance(c, Earlier)))
        decision = decide(new, None, candidates, thresholds)
        if not isinstance(decision, Create):
            return None
        plans.append(decision.near_duplicates)
    return plans
