"""A webhook's body: the event exactly as the `memoryEvents` subscription shows it with every
field selected (camelCase names, enum names, ISO 8601 times), built from the same GraphQL types;
the project's own endpoint is also told which user made each change (`actorId`)."""

from __future__ import annotations

import dataclasses
import enum
import json
from datetime import datetime
from typing import Any

from memql import model
from memql.graphql.strawberry_internals import is_private, to_camel_case
from memql.graphql.types import MemoryEvent


def _graphql_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # the GraphQL fields only (a type may keep private state beside them)
        definition = getattr(type(value), "__strawberry_definition__", None)
        public = (
            {f.python_name for f in definition.fields if not is_private(f.type)}
            if definition
            else None
        )
        return {
            to_camel_case(f.name): _graphql_value(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if public is None or f.name in public
        }
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_graphql_value(v) for v in value]
    return value


def event_json(event: model.MemoryEvent) -> dict[str, Any]:
    fields = dict(_graphql_value(MemoryEvent.from_domain(event, name_actor=True)))
    # `changedAt` under its former name too, for this release only: receivers may still parse
    # it (the schema's deprecated `occurredAt` is a resolver, so not among the fields above)
    fields["occurredAt"] = fields["changedAt"]
    return fields


def body(event: model.MemoryEvent) -> bytes:
    return json.dumps(event_json(event), separators=(",", ":"), ensure_ascii=False).encode()
