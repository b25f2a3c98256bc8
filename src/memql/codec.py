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

from memql.model import MEMORY_FIELDS, SAID_FIELDS, Memory


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


def _field_value(name: str, value: Any, held: Any, optional: bool) -> Any:
    """The inverse of `json_value` for the field `name`, holding `held`."""
    if value is None:
        if optional:
            return None
        raise ValueError(f"{name} is required")
    if held is datetime:
        return datetime.fromisoformat(value)
    if typing.get_origin(held) is tuple:
        return tuple(value)
    if held in (uuid.UUID, str, bool) or (isinstance(held, type) and issubclass(held, enum.Enum)):
        return held(value)
    return value


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


def camel(name: str) -> str:
    """A domain name as the API spells it (`source_thread_ids` -> `sourceThreadIds`)."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def snapshot(memory: Memory) -> dict[str, Any]:
    """The memory as an event payload records it: what the save said, with the API's names,
    its id and the version it replaced (JSON-safe)."""
    said = {camel(name): getattr(memory, name) for name in SAID_FIELDS}
    return json.loads(
        json.dumps(
            {"id": memory.id, **said, "supersedes": memory.supersedes},
            default=lambda v: json_value(v) if not isinstance(v, datetime) else str(v),
        )
    )
