"""When a save may be absorbed into an existing memory, and when it contradicts one. Pure.

Sentence embeddings are nearly blind to the words that make two statements different facts:
"Meeting with Anna on 2026-03-02" and "... 2026-03-09" score 0.997, "Prefers email over phone
calls" and "Prefers phone calls over email" 0.981, "Deploys happen on Tuesdays and Thursdays" and
"... on Mondays and Wednesdays" 0.956. Similarity alone would merge different facts, so absorption
also requires the same literals (numbers, dates, versions, codes, weekdays, months), the same
polarity (an even or odd number of negations), the same order around a comparison ("X over Y")
and no word of a pair of opposites on one side only. Anything that fails a guard stays apart and
is reported as a near-duplicate instead, so the caller can decide to supersede.

A contradiction ("Likes tea." / "No longer likes tea.") often scores well below the
near-duplicate bar (0.78 here), so a save of opposite polarity is reported from a lower
similarity (`CONTRADICTION_FLOOR`) up. The figures come from the labelled pairs in
`bench/absorb/pairs.jsonl` (see docs/recall.md).
"""

from __future__ import annotations

import re
from functools import lru_cache

#: similarity from which a memory of opposite polarity is reported as a near-duplicate
CONTRADICTION_FLOOR = 0.60

# Every pattern here runs in time linear in the text (contents are up to 8,192 characters and
# a batch compares each with several others): a token is found whole and then tested, never by
# a pattern that backtracks over a run of word characters from every position within it.
_TOKEN = re.compile(r"[\w.:/+-]+")
_DIGIT = re.compile(r"\d")
_CALENDAR = re.compile(
    r"\b(mon|tues|wednes|thurs|fri|satur|sun)days?\b|"
    r"\b(january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\b|"
    r"\b(once|twice|thrice|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"half|quarter|dozen|hundred|thousand|million|first|second|third|last)\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(not|no|never|none|nobody|nothing|neither|nor|without|stopped|quit|no longer|"
    r"dislikes?|hates?|avoids?|\w+n't)\b",
    re.IGNORECASE,
)
# `\b` first: a word is tried from its start only (from inside it the match could only fail)
_COMPARISON = re.compile(
    r"\b(\w+)\s+(?:over|than|instead of|rather than|before|after)\s+(\w+)", re.IGNORECASE
)
_OPPOSITES = (
    ("short", "long"),
    ("shorter", "longer"),
    ("concise", "detailed"),
    ("brief", "detailed"),
    ("morning", "afternoon"),
    ("morning", "evening"),
    ("early", "late"),
    ("more", "less"),
    ("most", "least"),
    ("home", "office"),
    ("open", "closed"),
    ("weekly", "monthly"),
    ("daily", "weekly"),
    ("light", "dark"),
    ("hot", "cold"),
    ("increase", "decrease"),
    ("enable", "disable"),
    ("enabled", "disabled"),
)
_WORD = re.compile(r"[a-z]+")
_SPACE = re.compile(r"\s+")
# A batch of saves compares each input with several stored memories and earlier inputs, so
# the same text is read again and again: what each reading finds is kept for the latest texts.
_TEXTS_KEPT = 1024


@lru_cache(maxsize=_TEXTS_KEPT)
def normalise(text: str) -> str:
    """Case, spacing and trailing punctuation do not make a different memory."""
    return _SPACE.sub(" ", text.casefold()).strip().rstrip(".!;").strip()


@lru_cache(maxsize=_TEXTS_KEPT)
def literals(text: str) -> frozenset[str]:
    """Numbers, dates, versions and codes, and the weekdays, months and number words a text
    names."""
    # a literal is a whole token of word characters and . : / + - holding a digit
    found = {t.strip(".:/+-").casefold() for t in _TOKEN.findall(text) if _DIGIT.search(t)}
    found |= {_calendar_word(m.group(0)) for m in _CALENDAR.finditer(text)}
    return frozenset(found)


def _calendar_word(word: str) -> str:
    word = word.casefold()
    # "Mondays" and "Monday", "Sept" and "September" name the same day or month
    return word.removesuffix("s")[:3] if word.endswith(("day", "days")) or len(word) > 3 else word


def negations(text: str) -> frozenset[str]:
    return frozenset(m.casefold() for m in _NEGATION.findall(text))


@lru_cache(maxsize=_TEXTS_KEPT)
def polarity(text: str) -> bool:
    """False when the text negates (an odd number of negations): "doesn't like" and "no longer
    likes" agree with each other, not with "likes"."""
    return len(_NEGATION.findall(text)) % 2 == 0


@lru_cache(maxsize=_TEXTS_KEPT)
def comparisons(text: str) -> frozenset[tuple[str, str]]:
    """The (preferred, other) words around "over", "than", "instead of", "before", "after"."""
    return frozenset((a.casefold(), b.casefold()) for a, b in _COMPARISON.findall(text))


def one_sided_opposite(a: str, b: str) -> bool:
    """True when one text says a word and the other its opposite (and not the word itself)."""
    wa, wb = _words(a), _words(b)
    for x, y in _OPPOSITES:
        for p, q in ((x, y), (y, x)):
            if p in wa and p not in wb and q in wb and q not in wa:
                return True
    return False


@lru_cache(maxsize=_TEXTS_KEPT)
def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.casefold()))


def may_absorb(existing: str, new: str, similarity: float, threshold: float) -> bool:
    """True when `new` says the same thing as `existing` (whose embedding similarity is given)."""
    if normalise(existing) == normalise(new):
        return True
    return (
        similarity >= threshold
        and literals(existing) == literals(new)
        and polarity(existing) == polarity(new)
        and comparisons(existing) == comparisons(new)
        and not one_sided_opposite(existing, new)
    )


def contradicts(existing: str, new: str, similarity: float) -> bool:
    """True when `new` looks like the negation of `existing`: worth reporting even below the
    near-duplicate bar, so the caller can supersede instead of keeping both."""
    return similarity >= CONTRADICTION_FLOOR and polarity(existing) != polarity(new)
