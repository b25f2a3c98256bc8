"""Memory <-> JSON-safe dict, one format for everything that carries memories as text (the
broadcast between instances, export files, event payloads). Every form is derived from the
`Memory` dataclass's fields (`model.MEMORY_FIELDS`): a new field is carried without a change
here."""

from __future__ import annotations

import enum
import json
import typing
import uuid
from datetime import datetime
from typing import Any

from memql.model import MEMORY_FIELDS, Memory, or_list
from memql.requests import NEW_MEMORY_FIELDS, camel


def parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value is not None else None


def json_value(value: Any) -> Any:
    """A field's value in JSON: ids as text, instants in ISO 8601, enums by value, tuples as
    lists."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


class UnreadableField(ValueError):
    """A record's field holds what the field cannot."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _field_value(name: str, value: Any, held: Any, optional: bool) -> Any:
    """The inverse of `json_value` for the field `name`, holding `held`."""
    if value is None:
        if optional:
            return None
        raise UnreadableField(name, f"`{name}` is required")
    if isinstance(held, type) and issubclass(held, enum.Enum):
        if value not in {m.value for m in held}:
            raise UnreadableField(name, f"`{name}` is one of {or_list(m.value for m in held)}")
        return held(value)
    if typing.get_origin(held) is tuple:
        if not isinstance(value, list):
            raise UnreadableField(name, f"`{name}` is a list")
        return tuple(value)
    if held in _READ:
        kind, read = _READ[held]
        try:
            return read(value)
        except (ValueError, TypeError, AttributeError):
            raise UnreadableField(name, f"`{name}` is {kind}") from None
    return value


def _exactly(kind: type) -> Any:
    def read(value: Any) -> Any:
        if not isinstance(value, kind):
            raise TypeError(kind)
        return value

    return read


# what a JSON value of each held type must be, and how it is read
_READ: dict[Any, tuple[str, Any]] = {
    uuid.UUID: ("a UUID", uuid.UUID),
    datetime: ("an ISO 8601 instant", datetime.fromisoformat),
    str: ("a string", _exactly(str)),
    bool: ("true or false", _exactly(bool)),
}


def memory_to_dict(m: Memory) -> dict[str, Any]:
    return {name: json_value(getattr(m, name)) for name in MEMORY_FIELDS}


def memory_from_dict(d: dict[str, Any], *, project_id: uuid.UUID | None = None) -> Memory:
    """The inverse of `memory_to_dict`; `project_id` overrides the recorded project. A field
    that may be None may be absent (records written before it existed). Raises KeyError,
    ValueError or TypeError on a malformed record."""
    given: dict[str, Any] = {"project_id": project_id} if project_id is not None else {}
    values = {
        name: _field_value(name, d.get(name) if optional else d[name], held, optional)
        for name, (held, optional) in MEMORY_FIELDS.items()
        if name not in given
    }
    return Memory(**values, **given)


def snapshot(memory: Memory) -> dict[str, Any]:
    """The memory as an event payload records it: what the save said, with the API's names,
    its id and the version it replaced (JSON-safe)."""
    said = {camel(name): getattr(memory, name) for name in NEW_MEMORY_FIELDS}
    # json.loads is typed Any: a dict dumped loads as a dict
    loaded: dict[str, Any] = json.loads(
        json.dumps(
            {"id": memory.id, **said, "supersedes": memory.supersedes},
            default=lambda v: json_value(v) if not isinstance(v, datetime) else str(v),
        )
    )
    return loaded
