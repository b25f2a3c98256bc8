"""Input rules shared by every entry point (GraphQL, MCP, import). Pure; raises BadInput.

Errors name fields and arguments as the domain does (`source_thread_ids`, `occurred_after`);
each transport renames them for its callers (GraphQL in camelCase, MCP as its tools spell
their arguments). Every bound is one of `Limits`."""

from __future__ import annotations

import functools
import inspect
import json
import math
import re
import uuid
from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from memql import requests
from memql.errors import BadInput
from memql.model import Scope
from memql.requests import Criteria, MemoryDraft, MemoryFilter, NewMemory
from memql.settings import LIMITS, Limits
from memql.words import api_of

# integers in JSON values: what every JSON client and PostgreSQL's bigint agree on
JSON_INT_RANGE = range(-(2**63), 2**63)
# PostgreSQL `text` and `jsonb` cannot hold NUL; a lone surrogate (U+D800..U+DFFF) is not a
# character at all: UTF-8 cannot encode it and the tokenizer refuses it
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# every line break str.splitlines() knows: one line must not hold any of them
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def content(text: str, limits: Limits, *, field: str = "content") -> str:
    trimmed = text.strip()
    if not trimmed:
        raise BadInput(f"`{field}` is empty", field=field)
    if len(trimmed) > limits.content_chars:
        raise BadInput(
            f"`{field}` has {len(trimmed)} characters; the limit is {limits.content_chars}",
            field=field,
        )
    return trimmed


@functools.cache
def _key_pattern(chars: int) -> re.Pattern[str]:
    return re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._:/-]{{0,{chars - 1}}}$")


def key(value: str | None, limits: Limits) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not _key_pattern(limits.key_chars).match(value):
        raise BadInput(
            f"`key` must be a slug: 1..{limits.key_chars} of letters, digits and . _ : / -,"
            " starting with a letter or digit",
            field="key",
        )
    return value


def category(value: str | None, limits: Limits) -> str:
    if value is None:
        return "general"
    value = value.strip()
    if not value or len(value) > limits.category_chars or _LINE_BREAK.search(value):
        raise BadInput(
            f"`category` must be 1..{limits.category_chars} characters on one line",
            field="category",
        )
    return value


def thread_ids(values: tuple[str, ...] | list[str], limits: Limits) -> tuple[str, ...]:
    cleaned = tuple(dict.fromkeys(v.strip() for v in values))
    if len(cleaned) > limits.source_thread_ids:
        raise BadInput(
            f"`source_thread_ids` has {len(cleaned)} ids; the limit is {limits.source_thread_ids}",
            field="source_thread_ids",
        )
    if any(not v or len(v) > limits.thread_id_chars for v in cleaned):
        raise BadInput(
            f"each of `source_thread_ids` must be 1..{limits.thread_id_chars} characters",
            field="source_thread_ids",
        )
    return cleaned


def source(value: Any, limits: Limits) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadInput("`source` must be a JSON object", field="source")
    if len(json.dumps(value)) > limits.source_bytes:
        raise BadInput(f"`source` is larger than {limits.source_bytes} bytes", field="source")
    return value


def expires_at(value: datetime | None, now: datetime) -> datetime | None:
    if value is None:
        return None
    value = instant(value, field="expires_at")
    assert value is not None
    if value <= now:
        raise BadInput("`expires_at` must be in the future", field="expires_at")
    return value


def instant(value: datetime | None, *, field: str = "time") -> datetime | None:
    """A point in time; one given without a zone is taken as UTC. It must be a time in UTC
    too (`0001-01-01T00:00:00+01:00` is not: comparing or storing it overflows)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    storable_instant(value, field=field)
    return value


def check_range(after: datetime | None, before: datetime | None, *, field: str) -> None:
    """The range [after, before) of `<field>_after` / `<field>_before` must not be empty."""
    if after is not None and before is not None and after >= before:
        raise BadInput(
            f"`{field}_after` must be earlier than `{field}_before`", field=f"{field}_after"
        )


def new_memory(draft: MemoryDraft, limits: Limits, now: datetime | None = None) -> NewMemory:
    """`draft` checked into a memory to write, or BadInput naming the first field that breaks
    a rule."""
    now = now or datetime.now(UTC)
    return NewMemory(
        replace(
            draft,
            content=content(draft.content, limits),
            key=key(draft.key, limits),
            category=category(draft.category, limits),
            source_thread_ids=thread_ids(draft.source_thread_ids, limits),
            source=source(draft.source, limits),
            expires_at=expires_at(draft.expires_at, now),
            occurred_at=instant(draft.occurred_at, field="occurred_at"),
        )
    )


def parse_id(value: str, *, argument: str = "id", what: str = "memory id") -> uuid.UUID:
    """An id argument as a UUID; BadInput naming the argument when it is not one."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise BadInput(f"`{argument}` is not a {what} (a UUID)", argument=argument) from None


def bounded(value: int | None, default: int, maximum: int, *, field: str) -> int:
    """A count in 1..`maximum`, `default` when left out (for arguments that are not a
    record's: a record's numbers state their bounds, `number`)."""
    if value is None:
        return default
    if not 1 <= value <= maximum:
        raise BadInput(f"`{field}` must be between 1 and {maximum}", field=field)
    return value


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def number(record: Any, name: str, limits: Limits, *, absent: float | None = None) -> Any:
    """The number `record.<name>` within the bounds its field states (`words.api`); when
    left out, the `Limits` field the field names as its default, else `absent`. BadInput
    naming the field when it is out of bounds."""
    value = getattr(record, name)
    meta = api_of(type(record), name)
    if value is None:
        shown = requests.default(meta, limits)
        return shown if shown is not None else absent
    low = requests.bound(meta.minimum, limits)
    high = requests.bound(meta.maximum, limits)
    if (
        not math.isfinite(value)
        or (low is not None and value < low)
        or (high is not None and value > high)
    ):
        span = f"between {_number_text(low or 0)} and {_number_text(high or math.inf)}"
        raise BadInput(f"`{name}` must be {span}", field=name)
    return value


def criteria(flt: MemoryFilter, scopes: tuple[Scope, ...], limits: Limits) -> Criteria:
    """`flt` checked for a read of `scopes`: its instants in UTC (one without a zone is taken
    as UTC), each range `<x>_after` .. `<x>_before` not empty, `source` a JSON object within
    the limits, and what admits every memory (an empty list or text) left out. Every field of
    a time is checked as one, so a new one needs no rule here."""
    values: dict[str, Any] = {}
    for f in fields(flt):
        value = getattr(flt, f.name)
        if isinstance(value, datetime):
            value = instant(value, field=f.name)
        elif value == () or value == "":
            value = None
        values[f.name] = value
    for name, value in values.items():
        if name.endswith("_after"):
            base = name.removesuffix("_after")
            check_range(value, values[f"{base}_before"], field=base)
    values["source"] = source(values["source"], limits)
    return Criteria(scopes, MemoryFilter(**values))


def live_only(record: Any) -> None:
    """Refuse what `record` holds in its filter but does not read (`requests.nested`): a
    recall and a context block see live memories only."""
    for name, refused in requests.refused(type(record)).items():
        inner = getattr(record, name)
        for f in fields(inner):
            if f.name in refused and getattr(inner, f.name) != f.default:
                raise BadInput(
                    f"`{f.name}` is not taken here: this read sees live memories only",
                    field=f.name,
                )


def event_cursor(since: str | None) -> int | None:
    """A `since` argument: the cursor of an event (a non-negative integer, as a string)."""
    if since is None:
        return None
    text = since.strip()
    if not (text.isascii() and text.isdigit()) or int(text) > 2**63 - 1:
        raise BadInput("`since` is not an event cursor this API returned", argument="since")
    return int(text)


# --- what any text or JSON value must be before it reaches the model or the database ---------


def storable_text(value: str, *, field: str) -> None:
    """Refuse NUL and lone surrogates: nothing downstream can hold them."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return
    char = found.group()
    what = "a NUL character" if char == "\x00" else f"a lone surrogate (U+{ord(char):04X})"
    raise BadInput(f"`{field}` contains {what}, which cannot be stored", field=field)


def storable_instant(value: datetime, *, field: str) -> None:
    """Refuse a time with a zone that falls outside years 1..9999 once in UTC: Python cannot
    compare it with another zone's time, and the driver cannot send it."""
    if value.tzinfo is None:
        return
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise BadInput(
            f"`{field}` is out of range: once in UTC it must fall between"
            " 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z",
            field=field,
        ) from None


def storable_json(value: Any, *, field: str, limits: Limits) -> None:
    """Refuse what JSON text or `jsonb` cannot hold: non-finite numbers, integers beyond 64
    bits, unstorable text in keys or values, nesting deeper than `limits.json_depth`.
    Iterative, so no value is too deep to be checked."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            storable_text(item, field=field)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise BadInput(
                    f"`{field}` holds a number that is not finite (NaN or Infinity)", field=field
                )
        elif isinstance(item, int):
            if item not in JSON_INT_RANGE:
                raise BadInput(f"`{field}` holds an integer beyond 64 bits", field=field)
        elif isinstance(item, dict | list | tuple):
            if depth >= limits.json_depth:
                raise BadInput(
                    f"`{field}` is nested deeper than {limits.json_depth} levels", field=field
                )
            if isinstance(item, dict):
                for k, v in item.items():
                    stack.append((k, depth + 1))
                    stack.append((v, depth + 1))
            else:
                stack.extend((v, depth + 1) for v in item)


def storable(value: Any, *, field: str, limits: Limits = LIMITS) -> None:
    """Check one argument of the service: text, JSON, a save request, or a sequence of them."""
    if isinstance(value, str):
        storable_text(value, field=field)
    elif isinstance(value, dict):
        storable_json(value, field=field, limits=limits)
    elif isinstance(value, datetime):
        storable_instant(value, field=field)
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            storable(getattr(value, f.name), field=f.name, limits=limits)
    elif isinstance(value, list | tuple):
        batch = len(value) > 1 and all(is_dataclass(v) for v in value)
        for index, item in enumerate(value):
            try:
                storable(item, field=field, limits=limits)
            except BadInput as exc:
                if batch:
                    exc.extensions["index"] = index
                    exc.message = f"input {index}: {exc.message}"
                    exc.args = (exc.message,)
                raise
    elif isinstance(value, float) and not math.isfinite(value):
        raise BadInput(f"`{field}` is not a finite number", field=field)


F = TypeVar("F", bound=Callable[..., Any])


def storable_arguments(method: F) -> F:
    """Every argument of a service method after the principal is checked with `storable`
    (within the service's `limits`) before the method runs: the one gate between every
    transport and the database."""
    signature = inspect.signature(method)

    @functools.wraps(method)
    def checked(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        limits = getattr(args[0], "limits", LIMITS)
        for name, value in list(bound.arguments.items())[2:]:  # self, principal
            storable(value, field=name, limits=limits)
        return method(*args, **kwargs)

    return checked  # type: ignore[return-value]
