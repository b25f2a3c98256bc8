"""The MCP tools' argument schemas, generated from the operations' records (`memql.requests`).

Each tool's arguments are a pydantic model made from the records it takes (`tool_args`): a field
for each argument offered to agents, with its words, bounds and MCP name; enums by their
values. `record_of` turns a call's validated arguments back into the record.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from memql import requests
from memql.requests import REQUIRED, Arg, Part, mcp_name
from memql.rules.validation import parse_id
from memql.settings import LIMITS


class _Schema(GenerateJsonSchema):
    """JSON schemas without `anyOf [..., null]` for optional arguments: leaving an argument out
    is how an agent says "none", and plain types are easier for models to fill in."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])


class Args(BaseModel):
    # unknown arguments are an error, never ignored (`additionalProperties: false`)
    model_config = ConfigDict(extra="forbid")

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        schema = cls.model_json_schema(schema_generator=_Schema)
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
            if prop.get("default", 0) is None:
                prop.pop("default")
        return schema


def _spell(value: Any) -> str:
    return str(value.value)


def _item_type(held: Any) -> Any:
    """One value as an agent writes it: an enum by its values, an id as text."""
    if isinstance(held, type) and issubclass(held, enum.Enum):
        return Literal[tuple(v.value for v in held)]
    if held is uuid.UUID:
        return str
    return held


def _field(arg: Arg) -> tuple[Any, Any]:
    held = list[_item_type(arg.item)] if arg.is_list else _item_type(arg.held)  # type: ignore[misc]
    shown = requests.default(arg.api, LIMITS)
    bounds: dict[str, Any] = {
        "ge": requests.bound(arg.api.minimum, LIMITS),
        "le": requests.bound(arg.api.maximum, LIMITS),
    }
    if arg.default is REQUIRED and held is str:
        bounds["min_length"] = 1
    words = requests.describe(arg.api, LIMITS, _spell, agents=True)
    if shown is not None:
        return held, Field(shown, description=words, **bounds)
    if arg.default is REQUIRED:
        return held, Field(description=words, **bounds)
    if isinstance(arg.default, tuple):
        return held, Field(default_factory=list, description=words, **bounds)
    return (held | None if arg.optional else held), Field(arg.default, description=words, **bounds)


def tool_args(name: str, *records: Part, former_names: bool = False) -> type[Args]:
    """The arguments of a tool taking `records`: a field for each argument offered to agents
    and, with `former_names`, one for each deprecated former name (`Api.was`)."""
    fields: dict[str, Any] = {}
    for arg in requests.arguments(*records):
        if not arg.api.for_agents:
            continue
        fields[mcp_name(arg)] = _field(arg)
        if former_names and arg.api.was is not None:
            fields[arg.api.was] = (
                _item_type(arg.item) | None,
                Field(
                    None,
                    description=f"One of `{mcp_name(arg)}`: deprecated, use `{mcp_name(arg)}`.",
                    deprecated=True,
                ),
            )
    model: type[Args] = create_model(name, __base__=Args, **fields)
    return model


def _domain_value(arg: Arg, value: Any) -> Any:
    """A value of `arg` as the record holds it: enums from their values, ids parsed."""
    if value is None:
        return None
    if arg.held is uuid.UUID:
        return parse_id(value, argument=mcp_name(arg))
    item = arg.item
    if isinstance(item, type) and issubclass(item, enum.Enum):
        return [item(v) for v in value] if arg.is_list else item(value)
    return value


def record_of(part: Part, args: Args) -> Any:
    """The record (of `part`, as `tool_args` took it) that a tool's validated arguments stand
    for; what the tool did not take keeps its default."""
    record = part[0] if isinstance(part, tuple) else part
    given = args.model_dump(exclude_unset=True)
    values: dict[str, Any] = {}
    for arg in requests.arguments(part):
        if mcp_name(arg) in given:
            values[arg.name] = _domain_value(arg, given[mcp_name(arg)])
        if arg.api.was is not None and arg.api.was in given:
            one = dataclasses.replace(arg, held=arg.item)
            values[arg.api.was] = _domain_value(one, given[arg.api.was])
    return requests.build(record, values)
