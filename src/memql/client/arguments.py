"""An operation's GraphQL arguments generated from the records it takes (`memql.requests`): each
argument declared with its GraphQL type, passed by its GraphQL name, its value as the API takes
it. `tests/unit/test_client_operations.py` holds the documents to `schema.graphql`."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from memql import requests
from memql.model import Kind, Order, Scope
from memql.requests import Arg, Part

E = TypeVar("E", bound=enum.Enum)

# the GraphQL type of one value of each type a record's field holds
GRAPHQL_TYPES: dict[Any, str] = {
    Scope: "MemoryScope",
    Kind: "MemoryKind",
    Order: "MemoryOrder",
    str: "String",
    int: "Int",
    float: "Float",
    bool: "Boolean",
    datetime: "DateTime",
    dict[str, Any]: "JSON",
    uuid.UUID: "ID",
}


def enum_name(enum_type: type[E], value: E | str) -> str:
    """An enum's GraphQL name from the enum or its name or value in any case."""
    if isinstance(value, enum_type):
        return value.name
    text = str(value)
    for member in enum_type:
        if text.upper() == member.name or text == member.value:
            return member.name
    raise ValueError(f"{text!r} is not a {enum_type.__name__}")


def graphql_type(arg: Arg) -> str:
    """The variable's type: nullable, so a value left out takes the server's default, unless
    the argument is required."""
    item = GRAPHQL_TYPES[arg.item]
    kind = f"[{item}!]" if arg.is_list else item
    return f"{kind}!" if arg.default is requests.REQUIRED else kind


def json_value(item: Any, value: Any) -> Any:
    """A value of one item of type `item` as the API takes it in JSON."""
    if isinstance(item, type) and issubclass(item, enum.Enum):
        return enum_name(item, value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Order):
        return {"field": value.field.name, "direction": value.direction.name}
    return value


@dataclass(frozen=True)
class Arguments:
    """The GraphQL arguments of an operation: its variable declarations (`$a: T, …`), how the
    field passes them (`a: $a, …`), and the variables of one call."""

    declared: str
    passed: str
    variables: dict[str, Any]


def values_json(args: Iterable[Arg], values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` (by field name) of `args` as the API takes them, by their GraphQL names; a
    value left out (or None) is not sent, so the server's default applies."""
    found: dict[str, Any] = {}
    for arg in args:
        value = values.get(arg.name)
        if value is None:
            continue
        if arg.is_list:
            found[requests.graphql_name(arg)] = [json_value(arg.item, v) for v in value]
        else:
            found[requests.graphql_name(arg)] = json_value(arg.held, value)
    return found


def input_json(record: type, value: Any) -> dict[str, Any]:
    """An input object of `record`'s fields (a `MemoryInput` as a `SaveMemoryInput`)."""
    args = requests.arguments(record)
    return values_json(args, {a.name: getattr(value, a.name) for a in args})


def arguments(records: Iterable[Part], values: Mapping[str, Any]) -> Arguments:
    """The arguments of an operation taking `records`, given `values` by field name (see
    `values_json`)."""
    args = requests.arguments(*records)
    variables = values_json(args, values)
    names = [(requests.graphql_name(a), graphql_type(a)) for a in args]
    return Arguments(
        ", ".join(f"${name}: {kind}" for name, kind in names),
        ", ".join(f"{name}: ${name}" for name, _ in names),
        variables,
    )
