"""A memory as a row: its columns (one per field of `Memory`, the same names), a row read back
into a `Memory`, a field's value as its column takes it."""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable
from typing import Any

from psycopg.types.json import Jsonb

from memql.model import MEMORY_FIELDS, Memory

# a memory's columns are its fields: `memories` has a column of the same name for each
MEMORY_COLUMNS = ", ".join(f"m.{name}" for name in MEMORY_FIELDS)


def _reader(held: Any) -> Callable[[Any], Any] | None:
    """How a column's value becomes the field's, where it is not already: enums from their
    text, tuples from arrays."""
    if isinstance(held, type) and issubclass(held, enum.Enum):
        return held
    if typing.get_origin(held) is tuple:
        return tuple
    return None


_READERS = [(name, _reader(held)) for name, (held, _) in MEMORY_FIELDS.items()]


def memory_from_row(row: dict[str, Any]) -> Memory:
    return Memory(
        **{
            name: row[name] if read is None or row[name] is None else read(row[name])
            for name, read in _READERS
        }
    )


def column_value(value: Any) -> Any:
    """A field's value as its column takes it."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return Jsonb(value)
    return value
