"""The context block: memories formatted as a markdown list for a system prompt. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, time

from memql.model import ContextBlock, ContextItem, Memory

HEADER = "## Memories"


def format_when(occurred_at: datetime) -> str:
    """An event time as a prompt shows it: the UTC date, and the time unless it is midnight."""
    at = occurred_at.astimezone(UTC)
    if at.time() == time(0, 0):
        return at.strftime("%Y-%m-%d")
    return at.strftime("%Y-%m-%d %H:%M UTC")


def format_line(memory: Memory | ContextItem) -> str:
    """One list item: tags (pinned, category, kind), the event time of a dated memory in
    parentheses, then the content on indented lines.

    Every kind of line break (`\\r` alone, U+2028, U+0085, form feed...) ends a line of the
    content, and every such line is indented, so no memory can start a list item of its own:
    a project memory is read into other users' prompts. Blank lines are dropped; tags are
    kept on one line.
    """
    tags = [" ".join(memory.category.split()), memory.kind.value]
    if memory.pinned:
        tags.insert(0, "pinned")
    lines = [line.rstrip() for line in memory.content.strip().splitlines() if line.strip()]
    body = "\n  ".join(lines)
    when = f"({format_when(memory.occurred_at)}) " if memory.occurred_at is not None else ""
    return f"- [{' · '.join(tags)}] {when}{body}"


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
