"""The context block: memories formatted as a markdown list for a system prompt. Pure.

The block's grammar, which `parse_context` reads back::

    ## Memories
    - [TAG · TAG · KIND] (WHEN) LINE      one entry per memory; "(WHEN) " only for a dated one
      LINE                               each further line of its content, indented two spaces
    _(N more memories omitted to fit the budget.)_

A memory's text can never add structure of its own, whatever it holds: every line of its
content is stripped and, when it begins with ASCII punctuation (`#`, `-`, `*`, `>`, `(`, `[`,
a backslash...), that character is escaped with a backslash, so no line reads as a header, a
list item, a quote, a fence, an event time or the omitted note; in a tag, `\\`, `[`, `]` and
`·` are escaped, so a category cannot close the tags or add one. A project memory is read into
other users' prompts: one user must not be able to write instructions that look like the
block's own.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time

from memql.model import ContextBlock, ContextItem, Kind, Memory

HEADER = "## Memories"
TAG_SEPARATOR = " · "
CONTINUATION = "  "
_PUNCTUATION = frozenset(string.punctuation)
_TAG_SPECIALS = frozenset("\\[]·")


def format_when(occurred_at: datetime) -> str:
    """An event time as a prompt shows it: the UTC date, and the time unless it is midnight."""
    at = occurred_at.astimezone(UTC)
    if at.time() == time(0, 0):
        return at.strftime("%Y-%m-%d")
    return at.strftime("%Y-%m-%d %H:%M UTC")


def content_lines(content: str) -> list[str]:
    """The lines a memory's content shows as: every kind of line break (`\\r` alone, U+2028,
    U+0085, form feed...) ends one, each is stripped (leading spaces would let a line hide an
    indented block), blank ones are dropped."""
    return [line.strip() for line in content.splitlines() if line.strip()]


def escape_line(line: str) -> str:
    """A content line that cannot start markdown structure: a leading ASCII punctuation
    character gets a backslash (CommonMark reads `\\#` as a literal `#`)."""
    return "\\" + line if line[:1] in _PUNCTUATION else line


def escape_tag(tag: str) -> str:
    """A tag on one line that cannot close the tag list or split into two tags."""
    collapsed = " ".join(tag.split())
    return "".join("\\" + ch if ch in _TAG_SPECIALS else ch for ch in collapsed)


def format_line(memory: Memory | ContextItem) -> str:
    """One entry: tags (pinned, category, kind), the event time of a dated memory in
    parentheses, then the content, its further lines indented (see the module's grammar)."""
    tags = [escape_tag(memory.category), memory.kind.value]
    if memory.pinned:
        tags.insert(0, "pinned")
    body = ("\n" + CONTINUATION).join(escape_line(line) for line in content_lines(memory.content))
    when = f"({format_when(memory.occurred_at)}) " if memory.occurred_at is not None else ""
    return f"- [{TAG_SEPARATOR.join(tags)}] {when}{body}"


def omitted_note(omitted: int) -> str:
    noun = "memory" if omitted == 1 else "memories"
    return f"_({omitted} more {noun} omitted to fit the budget.)_"


def format_context(
    memories: Sequence[Memory | ContextItem], budget: int, total: int | None = None
) -> ContextBlock:
    """Format `memories` in the order given, within `budget` characters in all.

    `total` is how many memories were eligible (defaults to ``len(memories)``); every one not
    shown is counted in the final note, and the note itself fits within the budget. Memories are
    never cut mid-way: one that does not fit is left out whole, and later shorter ones may still
    fit. An empty input gives an empty text.
    """
    total = len(memories) if total is None else total
    if total == 0:
        return ContextBlock(text="", count=0, omitted=0)
    lines: list[str] = []
    used = len(HEADER)
    for memory in memories:
        line = format_line(memory)
        omitted_if_added = total - len(lines) - 1
        reserve = len(omitted_note(omitted_if_added)) + 1 if omitted_if_added else 0
        if used + 1 + len(line) + reserve <= budget:
            lines.append(line)
            used += 1 + len(line)
    omitted = total - len(lines)
    parts = [HEADER, *lines]
    if omitted:
        parts.append(omitted_note(omitted))
    text = "\n".join(parts)
    if len(text) > budget:
        # not even the header and the note fit: say nothing rather than exceed the budget
        return ContextBlock(text="", count=0, omitted=total)
    return ContextBlock(text=text, count=len(lines), omitted=omitted)


@dataclass(frozen=True)
class ParsedEntry:
    """One entry read back from a block: its tags as written (category unescaped), its event
    time as shown, and its content lines joined by newlines."""

    pinned: bool
    category: str
    kind: Kind
    when: str | None
    content: str


@dataclass(frozen=True)
class ParsedBlock:
    entries: tuple[ParsedEntry, ...]
    omitted: int


_NOTE = re.compile(r"_\((\d+) more memor(?:y|ies) omitted to fit the budget\.\)_")
_WHEN = re.compile(r"\((\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2} UTC)?)\) ")


class ContextBlockSyntaxError(ValueError):
    """A text that does not follow the context block's grammar."""


def parse_context(text: str) -> ParsedBlock:
    """Read a block that `format_context` wrote back into its entries; the inverse that shows
    the format is unambiguous. Raises `ContextBlockSyntaxError` on anything else."""
    if text == "":
        return ParsedBlock(entries=(), omitted=0)
    lines = text.split("\n")
    if lines[0] != HEADER:
        raise ContextBlockSyntaxError("the block does not start with its header")
    omitted = 0
    note = _NOTE.fullmatch(lines[-1])
    if note:
        omitted = int(note.group(1))
        lines = lines[:-1]
    entries: list[ParsedEntry] = []
    current: list[str] = []
    for line in lines[1:]:
        if line.startswith("- ["):
            if current:
                entries.append(_parse_entry(current))
            current = [line]
        elif line.startswith(CONTINUATION) and current:
            current.append(line[len(CONTINUATION) :])
        else:
            raise ContextBlockSyntaxError(f"a line outside any entry: {line!r}")
    if current:
        entries.append(_parse_entry(current))
    return ParsedBlock(entries=tuple(entries), omitted=omitted)


def _parse_entry(lines: list[str]) -> ParsedEntry:
    first = lines[0]
    tags, rest = _parse_tags(first, 3)
    pinned = tags[0] == "pinned" and len(tags) == 3
    if len(tags) != (3 if pinned else 2):
        raise ContextBlockSyntaxError(f"unexpected tags: {tags!r}")
    kind = Kind(tags[-1])
    when = None
    match = _WHEN.match(rest)
    if match:
        when = match.group(1)
        rest = rest[match.end() :]
    body = [rest, *lines[1:]]
    return ParsedEntry(
        pinned=pinned,
        category=tags[-2],
        kind=kind,
        when=when,
        content="\n".join(_unescape_line(line) for line in body),
    )


def _parse_tags(line: str, start: int) -> tuple[list[str], str]:
    """The tags of `[...] ` starting at `start`, unescaped, and what follows the `] `."""
    tags: list[str] = []
    tag: list[str] = []
    i = start
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] in _TAG_SPECIALS:
            tag.append(line[i + 1])
            i += 2
        elif ch in "\\[":
            raise ContextBlockSyntaxError(f"an unescaped {ch!r} in the tags")
        elif ch == "]":
            if not line.startswith("] ", i):
                raise ContextBlockSyntaxError("the tags are not followed by a space")
            tags.append("".join(tag))
            return tags, line[i + 2 :]
        elif line.startswith(TAG_SEPARATOR, i):
            tags.append("".join(tag))
            tag = []
            i += len(TAG_SEPARATOR)
        elif ch == "·":
            raise ContextBlockSyntaxError("an unescaped '·' in a tag")
        else:
            tag.append(ch)
            i += 1
    raise ContextBlockSyntaxError("the tags are not closed")


def _unescape_line(line: str) -> str:
    if line.startswith("\\"):
        if line[1:2] not in _PUNCTUATION:
            raise ContextBlockSyntaxError(f"a backslash escaping nothing: {line!r}")
        return line[1:]
    if not line or line[0] in _PUNCTUATION or line != line.strip():
        raise ContextBlockSyntaxError(f"a content line that should have been escaped: {line!r}")
    return line
