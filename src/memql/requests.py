"""What each operation takes: one frozen record per input, as the caller said it.

- `MemoryDraft`: a memory to save (`save`, `save_many`, the new version of `supersede`);
- `MemoryFilter`: which memories a read admits, one filter for lists, recall and the context
  block;
- `PageRequest`: which page of a list, in which order;
- `RecallQuery` and `ContextQuery`: a recall, a context block (each with its filter);
- `MemoryRef`: the live memory a change names, by id or by key (`supersede`, `retire`).

Nothing here is checked: the service checks each record into the form the storage reads
(`validation`: a `MemoryDraft` becomes a `NewMemory`, a `MemoryFilter` a `Criteria`).

Each field says once what every transport says of it (`api`): its description, its bounds and
default (numbers, or names of `Limits` fields, read from the `Limits` in force), and its name
where a transport spells it otherwise than by its rule (GraphQL in camelCase, MCP as written).
GraphQL arguments and inputs, MCP tool schemas, the Python client's variables and the words of
errors are derived from these fields (`arguments`, `build`, `describe`, `renames`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, NewType, TypeVar

from memql.errors import BadInput
from memql.model import InvalidationReason, Kind, Order, Scope, or_list, unwrap_optional
from memql.words import API_KEY, NESTED_KEY, Api, api, nested

# --- the records ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryDraft:
    """A memory to save, as the caller said it (`validation.new_memory` checks it)."""

    content: str = field(
        metadata=api(
            'The statement, self-contained and in the third person ("Prefers concise status'
            ' updates."), 1..{content_chars} characters once trimmed.'
        )
    )
    kind: Kind = field(metadata=api("What it is. {Kind}"))
    # None: the user scope for a save, the superseded memory's scope for a supersede
    scope: Scope | None = field(
        default=None,
        metadata=api("Where it lives; the user's own memories when left out. {Scope}"),
    )
    key: str | None = field(
        default=None,
        metadata=api(
            "A stable slug for a fact that gets refined over time (e.g. `preferred-language`),"
            " 1..{key_chars} letters, digits and . _ : / -. Saving again with a live key"
            " supersedes that memory."
        ),
    )
    category: str | None = field(
        default=None,
        metadata=api(
            "A short label such as `preferences` or `work` (default `general`), one line of"
            " 1..{category_chars} characters."
        ),
    )
    pinned: bool = field(
        default=False,
        metadata=api("Always put it first in the context block; for standing rules."),
    )
    source_thread_ids: tuple[str, ...] = field(
        default=(),
        metadata=api(
            "Ids of the conversations it came from (provenance), up to {source_thread_ids}."
        ),
    )
    source: dict[str, Any] | None = field(
        default=None,
        metadata=api(
            "Provenance object (tool, agent, message) of up to {source_bytes} bytes; never"
            " used for access decisions.",
            for_agents=False,
        ),
    )
    expires_at: datetime | None = field(
        default=None,
        metadata=api(
            "The instant (ISO 8601) after which the memory no longer applies (it then reads as"
            " expired)."
        ),
    )
    occurred_at: datetime | None = field(
        default=None,
        metadata=api(
            "For an episodic memory: when the event happened (a date or an instant, UTC unless"
            " it says otherwise); shown in the context block."
        ),
    )


# a draft once checked (content trimmed, category given, limits kept): only
# `validation.new_memory` makes one, and only it is written (`db.memories.insert_memory`)
NewMemory = NewType("NewMemory", MemoryDraft)
# the fields a save gives, as a memory keeps them (every field of a draft is one of Memory's)
NEW_MEMORY_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(MemoryDraft))


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a read admits; a field left out admits every memory. Time ranges include
    their `…_after` instant and exclude their `…_before` one."""

    scope: Scope | None = field(
        default=None,
        metadata=api("Only this scope; every scope the credential reads when left out. {Scope}"),
    )
    kinds: tuple[Kind, ...] | None = field(
        default=None, metadata=api("Only these kinds. {Kind}", was="kind")
    )
    categories: tuple[str, ...] | None = field(
        default=None, metadata=api("Only these categories.", was="category")
    )
    pinned: bool | None = field(
        default=None, metadata=api("Only pinned (true) or unpinned (false) memories.")
    )
    contains: str | None = field(
        default=None, metadata=api("Only memories whose text contains this (ignoring case).")
    )
    include_invalidated: bool = field(
        default=False,
        metadata=api(
            "Also the retired, superseded and expired versions.",
            mcp="include_forgotten",
            agents="Also list forgotten, superseded and expired versions.",
        ),
    )
    # a memory without an event time is outside every `occurred` range that has an end
    occurred_after: datetime | None = field(
        default=None,
        metadata=api("Only memories whose event happened at or after this (ISO 8601)."),
    )
    occurred_before: datetime | None = field(
        default=None, metadata=api("Only memories whose event happened before this (ISO 8601).")
    )
    created_after: datetime | None = field(
        default=None,
        metadata=api("Only memories created at or after this.", for_agents=False),
    )
    created_before: datetime | None = field(
        default=None, metadata=api("Only memories created before this.", for_agents=False)
    )
    updated_after: datetime | None = field(
        default=None,
        metadata=api("Only memories last updated at or after this.", for_agents=False),
    )
    updated_before: datetime | None = field(
        default=None,
        metadata=api("Only memories last updated before this.", for_agents=False),
    )
    source: dict[str, Any] | None = field(
        default=None,
        metadata=api(
            'Only memories whose `source` contains this object, e.g. {"tool": "slack"} (JSON'
            " containment: nested objects match by their keys, arrays by their elements).",
            for_agents=False,
        ),
    )


@dataclass(frozen=True)
class PageRequest:
    """Which page of a list: the `first` after the cursor `after`, or the `last` before
    `before` (at most one of `first` and `last`; neither: the first page of the default
    size), in `order`."""

    first: int | None = field(
        default=None,
        metadata=api(
            "Page size from the start or `after` (default {list_default}, at most {list_max}).",
            minimum=1,
            maximum="list_max",
        ),
    )
    after: str | None = field(
        default=None,
        metadata=api(
            "A page's `endCursor`: the page after it.",
            agents="`next_cursor` of the previous page.",
        ),
    )
    last: int | None = field(
        default=None,
        metadata=api(
            "Page size from the end or `before` (at most {list_max}).",
            minimum=1,
            maximum="list_max",
            for_agents=False,
        ),
    )
    before: str | None = field(
        default=None,
        metadata=api("A page's `startCursor`: the page before it.", for_agents=False),
    )
    order: Order | None = field(
        default=None,
        metadata=api(
            "Default: newest created first. A cursor only works in the order it was made for.",
            graphql="orderBy",
            for_agents=False,
        ),
    )


# what recall and the context block refuse of the filter: they read live memories only
LIVE_ONLY = ("include_invalidated",)


@dataclass(frozen=True)
class RecallQuery:
    """A recall: the live memories most relevant to `text` that the filter admits."""

    text: str = field(
        metadata=api(
            "What to recall, in plain words (a question or topic), 1..{content_chars} characters.",
            graphql="query",
            mcp="query",
        )
    )
    limit: int | None = field(
        default=None,
        metadata=api(
            "How many memories to return, best first (default {recall_default}, at most"
            " {recall_max}).",
            minimum=1,
            maximum="recall_max",
            default="recall_default",
        ),
    )
    min_score: float | None = field(
        default=None,
        metadata=api(
            "Only memories scoring at least this, in [0, 1]: e.g. 0.3 keeps out memories"
            " unrelated to the query, so a query about nothing stored returns nothing.",
            minimum=0,
            maximum=1,
        ),
    )
    filter: MemoryFilter = field(default_factory=MemoryFilter, metadata=nested(without=LIVE_ONLY))


@dataclass(frozen=True)
class ContextQuery:
    """A context block: pinned memories first, then those most relevant to `text` (or the
    newest without it) that the filter admits, within `budget` characters."""

    text: str | None = field(
        default=None,
        metadata=api(
            "What the conversation is about: the most relevant memories follow the pinned"
            " ones (the newest when left out).",
            graphql="query",
            mcp="query",
        ),
    )
    budget: int | None = field(
        default=None,
        metadata=api(
            "The block's size in characters (default {context_budget}, at most"
            " {context_budget_max}).",
            minimum=1,
            maximum="context_budget_max",
            default="context_budget",
        ),
    )
    filter: MemoryFilter = field(default_factory=MemoryFilter, metadata=nested(without=LIVE_ONLY))


@dataclass(frozen=True)
class MemoryRef:
    """The live memory a change names: by `id`, or by `key` within `scope`."""

    id: uuid.UUID | None = field(
        default=None, metadata=api("The id of the live memory (or name it by `key`).")
    )
    key: str | None = field(
        default=None, metadata=api("The key of the live memory, instead of `id`.")
    )
    scope: Scope | None = field(
        default=None,
        metadata=api("The scope of `key`: the user's own memories when left out."),
    )


RECORDS: tuple[type, ...] = (
    MemoryDraft,
    MemoryFilter,
    PageRequest,
    RecallQuery,
    ContextQuery,
    MemoryRef,
)


# --- reading the records ----------------------------------------------------------------------

REQUIRED: Any = dataclasses.MISSING


@dataclass(frozen=True)
class Arg:
    """One argument of an operation: a field of its record, or of a record nested in it."""

    name: str
    # the record holding the field
    record: type
    # the type the field holds, and whether None is one of its values
    held: Any
    optional: bool
    # the field's default, or REQUIRED
    default: Any
    api: Api

    @property
    def is_list(self) -> bool:
        return typing.get_origin(self.held) is tuple

    @property
    def item(self) -> Any:
        """What one value is: the element type of a list, else the field's type."""
        return typing.get_args(self.held)[0] if self.is_list else self.held


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return REQUIRED


# a record with some of its fields left out of an operation (`less`)
Part = type | tuple[type, frozenset[str]]


def less(record: type, *names: str) -> Part:
    """`record` less the fields `names`, for an operation that takes the others only."""
    return (record, frozenset(names))


def hints_of(record: type) -> Mapping[str, Any]:
    """`typing.get_type_hints(record)`, worked out once per record: every request builds its
    records, and resolving the annotations' names each time was a tenth of a busy server's
    time (docs/benchmarks.md, two tenants)."""
    return _hints(record)


@functools.cache
def _hints(record: type) -> Mapping[str, Any]:
    return MappingProxyType(typing.get_type_hints(record))


def arguments(*records: Part) -> tuple[Arg, ...]:
    """The arguments of an operation taking `records`, in their fields' order: each field, or
    the fields of a record nested in one (less those it refuses). Names are unique across an
    operation. Worked out once per operation."""
    return _arguments(*records)


@functools.cache
def _arguments(*records: Part) -> tuple[Arg, ...]:
    found: list[Arg] = []
    for part in records:
        record, without = part if isinstance(part, tuple) else (part, frozenset[str]())
        hints = hints_of(record)
        for f in dataclasses.fields(record):
            if NESTED_KEY in f.metadata:
                found += _arguments((hints[f.name], without | f.metadata[NESTED_KEY]))
            elif f.name not in without:
                kind, optional = unwrap_optional(hints[f.name])
                found.append(Arg(f.name, record, kind, optional, _default(f), f.metadata[API_KEY]))
    names = [a.name for a in found]
    if len(names) != len(set(names)):
        raise TypeError(f"an operation's arguments share a name: {names}")
    return tuple(found)


def refused(record: type) -> dict[str, frozenset[str]]:
    """The fields of each record nested in `record` that it refuses, by the nesting field."""
    return {
        f.name: f.metadata[NESTED_KEY]
        for f in dataclasses.fields(record)
        if NESTED_KEY in f.metadata
    }


R = TypeVar("R")


def build(record: type[R], values: Mapping[str, Any]) -> R:
    """`record` from the values of its arguments (see `arguments`), by field name; a field left
    out keeps its default. Lists become tuples; a deprecated former name (`Api.was`) gives its
    one value to the list. BadInput when a field is given under both names."""
    hints = hints_of(record)
    given: dict[str, Any] = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        if NESTED_KEY in f.metadata:
            given[f.name] = build(hints[f.name], values)
            continue
        meta: Api = f.metadata[API_KEY]
        value = values.get(f.name)
        former = values.get(meta.was) if meta.was is not None else None
        if former is not None:
            if value is not None:
                raise BadInput(f"pass `{f.name}` or `{meta.was}`, not both", argument=meta.was)
            value = (former,)
        if value is None and f.name not in values:
            continue
        if isinstance(value, list):
            value = tuple(value)
        given[f.name] = value
    return record(**given)


# --- what the transports say ------------------------------------------------------------------

# what each value of an enum means, in the words of a description
MEANINGS: dict[type[enum.Enum], dict[Any, str]] = {
    Kind: {
        Kind.TOPICAL: "a stable fact or preference",
        Kind.EPISODIC: "a dated one-off event",
        Kind.OPERATIONAL: "a procedure to follow",
    },
    Scope: {
        Scope.USER: "private to the user you act for",
        Scope.PROJECT: "shared across the project",
    },
}

Spelling = Callable[[enum.Enum], str]


def meanings(values: type[enum.Enum], spell: Spelling) -> str:
    """`a: …; b: ….`: what each value of an enum means, spelt as a transport spells it."""
    return "; ".join(f"{spell(v)}: {text}" for v, text in MEANINGS[values].items()) + "."


_PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")


def describe(meta: Api, limits: Any, spell: Spelling, *, agents: bool = False) -> str:
    """A field's description as a transport gives it: its agents' words for the MCP tools
    (`agents`) where it has some, the values of `limits` and the enums' meanings filled in."""
    text = meta.agents if agents and meta.agents is not None else meta.description
    words: dict[str, str] = {e.__name__: meanings(e, spell) for e in MEANINGS}
    words["InvalidationReason"] = or_list((str(r) for r in InvalidationReason), quote="`")

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        return words[name] if name in words else str(getattr(limits, name))

    return _PLACEHOLDER.sub(fill, text)


def bound(value: float | str | None, limits: Any) -> float | None:
    """A bound of `api`: a number, or the `Limits` field it names."""
    return getattr(limits, value) if isinstance(value, str) else value


def default(meta: Api, limits: Any) -> Any:
    """The value a number takes when left out, where a `Limits` field stands for it."""
    return getattr(limits, meta.default) if meta.default is not None else None


def camel(name: str) -> str:
    """A domain name as GraphQL spells it (`source_thread_ids` -> `sourceThreadIds`)."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def graphql_name(arg: Arg) -> str:
    return arg.api.graphql or camel(arg.name)


def mcp_name(arg: Arg) -> str:
    return arg.api.mcp or arg.name


def renames(transport: str) -> dict[str, str]:
    """The fields of every record that `transport` ("graphql" or "mcp") names otherwise than
    by its rule, and its names for them (for the words of errors)."""
    found: dict[str, str] = {}
    for record in RECORDS:
        for arg in arguments(record):
            name = getattr(arg.api, transport)
            if name is not None and found.setdefault(arg.name, name) != name:
                raise TypeError(f"`{arg.name}` has two {transport} names")
    return found


# --- the checked forms ------------------------------------------------------------------------


@dataclass(frozen=True)
class Criteria:
    """A read's filter once checked (`validation.criteria`): the scopes it covers, resolved
    against the grant, and the filter with its instants in UTC, its ranges not empty and its
    lists left out when empty. What the SQL of every read is built from (`db.filters`)."""

    scopes: tuple[Scope, ...]
    filter: MemoryFilter = MemoryFilter()
