"""The API's typed mirrors outside the server, written from the records: the fields of the Python
client's records (`memql/client/records.py`, a whole module) and the fields of a memory the
inspector selects and shows (a block of `memql/http/web/inspector/app.js`).

    python -m memql.graphql.mirrors

writes both; `tests/unit/test_graphql_mirrors.py` fails while either differs from what it writes.
A field added to `model.Memory` or to a record reaches the client and the inspector this way.

What the client takes is looser than what a record holds, by one rule (`loosened`): an enum by
its name or value too (`client.arguments.enum_name` reads either), any iterable where a record
holds a tuple. What it reads of a memory is what GraphQL shows (`model.shown_as`).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import re
import sys
import textwrap
import types
import typing
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memql import model, requests
from memql.requests import (
    LIVE_ONLY,
    REQUIRED,
    Arg,
    MemoryDraft,
    MemoryFilter,
    PageRequest,
    RecallQuery,
    less,
)
from memql.settings import LIMITS
from memql.words import API_KEY, Api

COMMAND = "python -m memql.graphql.mirrors"
PACKAGE = Path(__file__).resolve().parents[1]
RECORDS = PACKAGE / "client" / "records.py"
INSPECTOR = PACKAGE / "http" / "web" / "inspector" / "app.js"

# the generated module's lines are at most this long (ruff's line-length)
WIDTH = 100

# the order the client first published its `Memory` in, which its constructor keeps (`kind`
# before `scope`); every other field follows in the model's order
PUBLISHED_FIRST = ("id", "kind", "scope")


@dataclass(frozen=True)
class Field:
    """One field of a mirror: its name, its type, its words and its default (REQUIRED: none)."""

    name: str
    hint: Any
    words: str
    default: Any


@dataclass(frozen=True)
class Mirror:
    """One generated class: a frozen dataclass, or a TypedDict of keyword options (every key
    optional)."""

    name: str
    doc: str
    fields: tuple[Field, ...]
    options: bool = False


def _spell(value: enum.Enum) -> str:
    return str(value.name)


def words(meta: Api) -> str:
    """A field's words as GraphQL gives them (the limits and the enums' meanings filled in)."""
    return requests.describe(meta, LIMITS, _spell)


def loosened(held: Any) -> Any:
    """What the client takes for a value of type `held`: an enum, or its name or value; any
    iterable of what a tuple holds; anything else as it is."""
    if typing.get_origin(held) is tuple:
        return Iterable[loosened(typing.get_args(held)[0])]  # type: ignore[misc]
    if isinstance(held, enum.EnumType):
        return held | str
    return held


def optional(hint: Any, may_be_none: bool) -> Any:
    return hint | None if may_be_none else hint


def shown_memory() -> tuple[Field, ...]:
    """The fields of a memory the API shows, as the client reads them: what GraphQL shows of
    each, none with a default (an answer carries them all)."""
    metas = {f.name: f.metadata[API_KEY] for f in dataclasses.fields(model.Memory)}
    shown = [name for name in model.MEMORY_FIELDS if metas[name].shown]
    order = [*PUBLISHED_FIRST, *(name for name in shown if name not in PUBLISHED_FIRST)]
    found = []
    for name in order:
        held, may_be_none = model.MEMORY_FIELDS[name]
        hint = optional(model.shown_as(held), may_be_none)
        found.append(Field(name, hint, words(metas[name]), REQUIRED))
    return tuple(found)


def taken(args: Iterable[Arg], *, defaults: bool = False) -> tuple[Field, ...]:
    """The arguments as the client takes them (`loosened`), with their defaults if asked."""
    return tuple(
        Field(
            a.name,
            optional(loosened(a.held), a.optional),
            words(a.api),
            a.default if defaults else REQUIRED,
        )
        for a in args
    )


def formers(args: Iterable[Arg]) -> tuple[Field, ...]:
    """The deprecated former names of the arguments (`Api.was`), each taking one value."""
    return tuple(
        Field(
            a.api.was,
            loosened(a.item) | None,
            f"Deprecated, for one release: one value of `{a.name}`, which takes a list.",
            REQUIRED,
        )
        for a in args
        if a.api.was is not None
    )


def mirrors() -> tuple[Mirror, ...]:
    """Every generated class, in the module's order."""
    filtered = requests.arguments(less(MemoryFilter, *LIVE_ONLY))
    return (
        Mirror(
            "MemoryFields",
            "A memory as the API shows it: the shown fields of `memql.model.Memory` (the client's"
            " `Memory`).",
            shown_memory(),
        ),
        Mirror(
            "DraftFields",
            "The fields of `memql.requests.MemoryDraft` as the client takes them (its"
            " `MemoryInput`).",
            taken(requests.arguments(MemoryDraft), defaults=True),
        ),
        Mirror(
            "SaveFields",
            "A `MemoryDraft` less what a save takes by position, `content` and `kind` (the"
            " client's `SaveOptions`).",
            taken(requests.arguments(less(MemoryDraft, "content", "kind"))),
            options=True,
        ),
        Mirror(
            "FilterFields",
            "The fields of `memql.requests.MemoryFilter` that every read takes (the client's"
            " `FilterOptions`).",
            taken(filtered),
            options=True,
        ),
        Mirror(
            "ListFields",
            "What a list takes besides those: the filter's fields that only a list takes,"
            " `PageRequest` less `order` (which the client takes as `order_by` and"
            " `direction`) and the filter's former names (the client's `ListOptions`).",
            taken(a for a in requests.arguments(MemoryFilter) if a.name in LIVE_ONLY)
            + taken(requests.arguments(less(PageRequest, "order")))
            + formers(filtered),
            options=True,
        ),
        Mirror(
            "RecallFields",
            "What a recall takes besides its filter and its `text` (the client's `RecallOptions`).",
            taken(
                a for a in requests.arguments(less(RecallQuery, "text")) if a.record is RecallQuery
            ),
            options=True,
        ),
    )


# --- the client's module ----------------------------------------------------------------------


class Imports:
    """The names a generated module uses, and the import lines that give them."""

    def __init__(self) -> None:
        self.modules: set[str] = set()
        self.names: dict[str, set[str]] = collections.defaultdict(set)

    def spelt(self, hint: Any) -> str:
        """`hint` as the module spells it."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (types.UnionType, typing.Union):
            return " | ".join(self.spelt(a) for a in args)
        if origin is tuple:
            return f"tuple[{self.spelt(args[0])}, ...]"
        if origin is dict:
            return f"dict[{', '.join(self.spelt(a) for a in args)}]"
        if origin is collections.abc.Iterable:
            self.names["collections.abc"].add("Iterable")
            return f"Iterable[{self.spelt(args[0])}]"
        if hint is type(None):
            return "None"
        if hint is Any:
            self.names["typing"].add("Any")
            return "Any"
        if hint is uuid.UUID:
            self.modules.add("uuid")
            return "uuid.UUID"
        if hint is datetime:
            self.names["datetime"].add("datetime")
            return "datetime"
        if hint in (str, int, float, bool):
            return str(hint.__name__)
        # the domain's own enums: the client imports from the domain and nothing else
        if isinstance(hint, enum.EnumType) and hint.__module__ == model.__name__:
            self.names[model.__name__].add(hint.__name__)
            return hint.__name__
        raise TypeError(f"{COMMAND} cannot spell {hint!r}: teach `Imports.spelt` its name")

    def literal(self, value: Any) -> str:
        """A default as the module spells it."""
        if isinstance(value, enum.Enum):
            return f"{self.spelt(type(value))}.{value.name}"
        if value is None or value == () or isinstance(value, bool | int | float | str):
            return repr(value)
        raise TypeError(f"{COMMAND} cannot spell the default {value!r}")

    def lines(self) -> list[str]:
        """The import block (isort's order: the standard library, then memql)."""
        stdlib = [f"import {m}" for m in sorted(self.modules)] + [
            f"from {m} import {', '.join(sorted(self.names[m]))}"
            for m in sorted(self.names)
            if not m.startswith("memql")
        ]
        own = [
            f"from {m} import {', '.join(sorted(self.names[m]))}"
            for m in sorted(self.names)
            if m.startswith("memql")
        ]
        return ["from __future__ import annotations", "", *stdlib, "", *own]


def docstring(text: str, indent: str) -> list[str]:
    """`text` as a triple-quoted string, wrapped to the module's width."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if text.endswith('"'):
        text = text[:-1] + '\\"'
    lines = textwrap.wrap(text, WIDTH - len(indent) - 6, break_on_hyphens=False)
    lines[0] = '"""' + lines[0]
    lines[-1] += '"""'
    return [indent + line for line in lines]


def class_lines(mirror: Mirror, imports: Imports) -> list[str]:
    if mirror.options:
        imports.names["typing"].add("TypedDict")
        head = [f"class {mirror.name}(TypedDict, total=False):"]
    else:
        imports.names["dataclasses"].add("dataclass")
        head = ["@dataclass(frozen=True)", f"class {mirror.name}:"]
    body = [*docstring(mirror.doc, "    "), ""]
    for f in mirror.fields:
        default = "" if f.default is REQUIRED else f" = {imports.literal(f.default)}"
        body += [f"    {f.name}: {imports.spelt(f.hint)}{default}", *docstring(f.words, "    ")]
    return head + body


def client_records() -> str:
    """The text of `memql/client/records.py`."""
    imports = Imports()
    classes: list[str] = []
    for mirror in mirrors():
        classes += ["", "", *class_lines(mirror, imports)]
    head = docstring(
        f"Generated by `{COMMAND}` from the records; do not edit. The fields of the client's"
        " typed mirrors, each with its words (`memql.graphql.mirrors` says how each type is"
        " loosened); `types.py` and `operations.py` build the client's classes on them.",
        "",
    )
    return "\n".join([*head, "", *imports.lines(), *classes]) + "\n"


# --- the inspector's block --------------------------------------------------------------------

INSPECTOR_START = f"// generated by `{COMMAND}` from memql.model.Memory; do not edit"
INSPECTOR_END = "// end of generated"
_BLOCK = re.compile(re.escape(INSPECTOR_START) + r"\n(.*?)" + re.escape(INSPECTOR_END), re.DOTALL)


def shown_kind(hint: Any) -> str:
    """How the inspector shows a value of type `hint` (its `SHOW`)."""
    held, _ = model.unwrap_optional(hint)
    if typing.get_origin(held) is tuple:
        return "list"
    if held == dict[str, Any]:
        return "json"
    if isinstance(held, enum.EnumType):
        return "enum"
    kinds = {uuid.UUID: "id", datetime: "time", bool: "flag", int: "number", float: "number"}
    if held in kinds:
        return kinds[held]
    if held is str:
        return "text"
    raise TypeError(f"{COMMAND}: the inspector has no way to show {held!r}")


def inspector_block() -> str:
    """The lines between the markers: every field of a memory the API shows, by its GraphQL
    name, with how the inspector shows its value."""
    rows = [f'  {requests.camel(f.name)}: "{shown_kind(f.hint)}",' for f in shown_memory()]
    head = "// every field of a Memory (GraphQL's names), with how its value is shown (`SHOW`)"
    return "\n".join([head, "const MEMORY_FIELDS = {", *rows, "};"]) + "\n"


def block_in(page: str) -> str:
    """The block between the markers of `page` (`INSPECTOR_START`, `INSPECTOR_END`)."""
    found = _BLOCK.search(page)
    if found is None:
        raise ValueError(f"no generated block between {INSPECTOR_START!r} and {INSPECTOR_END!r}")
    return found.group(1)


def with_block(page: str) -> str:
    """`page` with the block between its markers replaced by the generated one."""
    block_in(page)
    return _BLOCK.sub(lambda _: f"{INSPECTOR_START}\n{inspector_block()}{INSPECTOR_END}", page, 1)


def write(records: Path = RECORDS, inspector: Path = INSPECTOR) -> list[Path]:
    """Write the client's module and the inspector's block; the files whose text changed."""
    changed = []
    for path, text in (
        (records, client_records()),
        (inspector, with_block(inspector.read_text(encoding="utf-8"))),
    ):
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def main() -> int:
    try:
        changed = write()
    except (OSError, ValueError, TypeError) as exc:
        print(f"memql.graphql.mirrors: {exc}", file=sys.stderr)
        return 1
    for path in changed:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
