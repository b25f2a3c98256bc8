"""Calibrate the absorb threshold on the labelled pairs in `bench/absorb/pairs.jsonl`.

Each line is `[label, a, b]` or `[label, a, b, kind_a, kind_b]` (kinds default to topical):
- `duplicate`: the same fact said twice; saving `b` after `a` should absorb it;
- `different`: same topic, a different fact; must stay apart;
- `contradiction`: `b` denies or reverses `a`; must never be absorbed, and should be reported as a
  near-duplicate so the caller can supersede;
- `other_kind`: the same text under another kind; must stay apart (absorption is same-kind only).

The decision is the service's own (`rules.saving.absorbs`: `dedup.may_absorb` on the real model's
cosine similarity, plus the same-kind rule). For each threshold it prints the false-absorb rate
(pairs that must stay apart but would be absorbed) and the missed-duplicate rate (true duplicates
that would not be).

    .venv/bin/python bench/absorb/calibrate.py
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memql.embeddings.local import LocalEmbedder
from memql.model import Kind
from memql.requests import MemoryDraft, NewMemory
from memql.rules import dedup, saving
from memql.settings import Settings

PAIRS = Path(__file__).parent / "pairs.jsonl"
APART = ("different", "contradiction", "other_kind")


@dataclass(frozen=True)
class Pair:
    label: str
    a: str
    b: str
    kind_a: str
    kind_b: str
    similarity: float

    def absorbed(self, threshold: float) -> bool:
        """What the service decides when `b` is saved while `a` is live."""
        return saving.absorbs(*self.memories(), self.similarity, threshold)

    def reported(self, bar: float) -> bool:
        """Whether saving `b` while `a` is live reports `a` as a near-duplicate."""
        return saving.reports(*self.memories(), self.similarity, bar)

    def memories(self) -> tuple[NewMemory, NewMemory]:
        return (
            NewMemory(MemoryDraft(self.a, Kind(self.kind_a))),
            NewMemory(MemoryDraft(self.b, Kind(self.kind_b))),
        )


def read_pairs() -> list[tuple[str, str, str, str, str]]:
    rows = []
    for line in PAIRS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            label, a, b, *kinds = json.loads(line)
            kind_a, kind_b = kinds or ("topical", "topical")
            rows.append((label, a, b, kind_a, kind_b))
    return rows


async def labelled_pairs(embedder: LocalEmbedder) -> list[Pair]:
    rows = read_pairs()
    vectors = await embedder.embed([t for r in rows for t in (r[1], r[2])])
    return [
        Pair(*row, similarity=float(np.dot(vectors[2 * i], vectors[2 * i + 1])))
        for i, row in enumerate(rows)
    ]


def rates(pairs: list[Pair], threshold: float) -> dict[str, float]:
    apart = [p for p in pairs if p.label in APART]
    dups = [p for p in pairs if p.label == "duplicate"]
    contradictions = [p for p in pairs if p.label == "contradiction"]
    return {
        "false_absorb": sum(p.absorbed(threshold) for p in apart) / len(apart),
        "missed_duplicate": sum(not p.absorbed(threshold) for p in dups) / len(dups),
        "contradictions_absorbed": sum(p.absorbed(threshold) for p in contradictions),
    }


async def main() -> int:
    embedder = await LocalEmbedder.load()
    try:
        pairs = await labelled_pairs(embedder)
    finally:
        await embedder.close()
    settings = Settings()
    counts = {label: sum(p.label == label for p in pairs) for label in ("duplicate", *APART)}
    print(f"pairs: {counts}")
    for label in counts:
        sims = sorted(p.similarity for p in pairs if p.label == label)
        print(
            f"  {label:13} similarity min {sims[0]:.3f} median {sims[len(sims) // 2]:.3f}"
            f" max {sims[-1]:.3f}"
        )
    print("\n| threshold | false-absorb rate | missed-duplicate rate | contradictions absorbed |")
    print("|---|---|---|---|")
    for t in [x / 100 for x in range(80, 100)]:
        r = rates(pairs, t)
        mark = " (configured)" if abs(t - settings.absorb_threshold) < 1e-9 else ""
        print(
            f"| {t:.2f}{mark} | {r['false_absorb']:.3f} | {r['missed_duplicate']:.3f}"
            f" | {r['contradictions_absorbed']:.0f} |"
        )
    near = settings.near_duplicate_threshold
    contradictions = [p for p in pairs if p.label == "contradiction"]

    print(
        f"\ncontradictions reported as near-duplicates (similarity >= {near:.2f}, or opposite"
        f" polarity from {dedup.CONTRADICTION_FLOOR:.2f}):"
        f" {sum(p.reported(near) for p in contradictions)}/{len(contradictions)}"
    )
    for p in contradictions:
        if not p.reported(near):
            print(f"  not reported: {p.similarity:.3f} {p.a!r} / {p.b!r}")
    t = float(sys.argv[1]) if len(sys.argv) > 1 else settings.absorb_threshold
    for p in pairs:
        wrong = p.absorbed(t) if p.label in APART else not p.absorbed(t)
        if wrong:
            print(f"  wrong at {t:.2f}: {p.label} {p.similarity:.3f} {p.a!r} / {p.b!r}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
