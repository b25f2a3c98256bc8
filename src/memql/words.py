"""What the transports say of a field, as dataclass field metadata: its words, its bounds and
default, its name per transport (`api`). The operations' records (`memql.requests`) and the
fields a memory shows (`model.Memory`) carry it; GraphQL, MCP and the Python client read it
(`requests.arguments`, `requests.describe`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, cast

API_KEY = "memql.api"
NESTED_KEY = "memql.nested"


@dataclass(frozen=True)
class Api:
    """What the transports say of one field (see `api`)."""

    description: str
    graphql: str | None = None
    mcp: str | None = None
    agents: str | None = None
    for_agents: bool = True
    minimum: float | None = None
    maximum: float | str | None = None
    default: str | None = None
    was: str | None = None
    # a field of a memory that no transport shows (whose it is, who made it)
    shown: bool = True


def api(
    description: str,
    *,
    graphql: str | None = None,
    mcp: str | None = None,
    agents: str | None = None,
    for_agents: bool = True,
    minimum: float | None = None,
    maximum: float | str | None = None,
    default: str | None = None,
    was: str | None = None,
    shown: bool = True,
) -> dict[str, Any]:
    """A field's metadata for the transports.

    `description` is the field's words for every caller; `{name}` in it is the `Limits` field
    of that name, `{Kind}` and `{Scope}` the meanings of the enum's values, spelt as the
    transport spells them. `agents` replaces the words for the MCP tools where agents need
    others; `for_agents=False` leaves the field out of the tools. `graphql` and `mcp` name the
    field where a transport does not follow its rule. `minimum` and `maximum` bound a number
    (`maximum` a number or the name of a `Limits` field); `default` names the `Limits` field a
    number takes when it is left out, which the schemas show. `was` is the field's former name,
    which took one value of its list: still accepted, deprecated, for one release.
    `shown=False` keeps a memory's field from every transport."""
    return {
        API_KEY: Api(
            description, graphql, mcp, agents, for_agents, minimum, maximum, default, was, shown
        )
    }


def nested(*, without: tuple[str, ...] = ()) -> dict[str, Any]:
    """Metadata of a field holding another record, whose fields become the operation's (but
    for those named in `without`, which this operation refuses)."""
    return {NESTED_KEY: frozenset(without)}


def api_of(record: type, name: str) -> Api:
    """What the transports say of the field `name` of `record`."""
    [meta] = [f.metadata[API_KEY] for f in dataclasses.fields(record) if f.name == name]
    # dataclass metadata is a mapping of Any: `api` is what writes this key, always an Api
    return cast(Api, meta)
