"""When a save may be absorbed into an existing memory. Pure.

Sentence embeddings are nearly blind to numbers and negation: "Meeting with Anna on 2026-03-02"
and "... 2026-03-09" score 0.997, "Deployed version 2.3" and "2.4" 0.944. Similarity alone would
merge different facts, so absorption also requires the same literals (numbers, dates, versions,
codes) and the same polarity. Anything that fails a guard is reported as a near-duplicate
instead, so the caller can decide to supersede.
"""

from __future__ import annotations

import re

_LITERAL = re.compile(r"[\w.:/+-]*\d[\w.:/+-]*")
_NEGATION = re.compile(
    r"\b(not|no|never|none|nobody|nothing|neither|nor|without|stopped|no longer|any more|"
    r"anymore|dislikes?|hates?|\w+n't)\b",
    re.IGNORECASE,
)
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Case, spacing and trailing punctuation do not make a different memory."""
    return _SPACE.sub(" ", text.casefold()).strip().rstrip(".!;").strip()


def literals(text: str) -> frozenset[str]:
    return frozenset(m.strip(".:/+-").casefold() for m in _LITERAL.findall(text))


def negations(text: str) -> frozenset[str]:
    return frozenset(m.casefold() for m in _NEGATION.findall(text))


def may_absorb(existing: str, new: str, similarity: float, threshold: float) -> bool:
    """True when `new` says the same thing as `existing` (whose embedding similarity is given)."""
    if normalise(existing) == normalise(new):
        return True
    return (
        similarity >= threshold
        and literals(existing) == literals(new)
        and negations(existing) == negations(new)
    )
