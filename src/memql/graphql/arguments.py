"""GraphQL arguments and inputs generated from the operations' records (`memql.requests`).

A resolver names the records it takes as parameters (`flt: MemoryFilter`); `takes_records`
replaces each with the record's arguments, as the record's fields describe them, and hands the
resolver the records built from what the caller passed. An input type gets its fields from a
record the same way (`fields_of`). Nothing here is written per field.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, TypeVar

import strawberry

from memql import requests
from memql.graphql.types import item_type
from memql.model import Order
from memql.requests import REQUIRED, Arg, camel, graphql_name
from memql.rules.validation import parse_id
from memql.settings import LIMITS

T = TypeVar("T")


# the records' fields GraphQL names otherwise than in camelCase
_RENAMES = requests.renames("graphql")


def graphql_spelling(name: str) -> str:
    """A domain name of a field or argument as GraphQL spells it (for the words of errors)."""
    return _RENAMES.get(name) or camel(name)


def _spell(value: Any) -> str:
    return str(value.name)


def description(arg: Arg) -> str:
    return requests.describe(arg.api, LIMITS, _spell)


def annotation(arg: Arg) -> Any:
    """The argument's type: a list of its items for a tuple; nullable unless it is required, a
    flag, or a number whose default the schema shows."""
    held = list[item_type(arg.item)] if arg.is_list else item_type(arg.held)  # type: ignore[misc]
    if arg.optional and arg.api.default is None:
        return held | None
    return held


def default(arg: Arg) -> Any:
    """The argument's default as the schema shows it; REQUIRED when it has none."""
    shown = requests.default(arg.api, LIMITS)
    if shown is not None:
        return shown
    if isinstance(arg.default, tuple):
        return list(arg.default)
    return arg.default


def deprecated_name(arg: Arg) -> str | None:
    return camel(arg.api.was) if arg.api.was is not None else None


def parameters(*records: type, former_names: bool = False) -> list[inspect.Parameter]:
    """The resolver parameters of `records`' arguments and, with `former_names`, of their
    deprecated former names (`Api.was`)."""
    params: list[inspect.Parameter] = []
    for arg in requests.arguments(*records):
        name = graphql_name(arg)
        params.append(
            inspect.Parameter(
                arg.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if default(arg) is REQUIRED else default(arg),
                annotation=Annotated[
                    annotation(arg),
                    strawberry.argument(
                        name=name if name != camel(arg.name) else None,
                        description=description(arg),
                    ),
                ],
            )
        )
        if former_names and arg.api.was is not None:
            params.append(
                inspect.Parameter(
                    arg.api.was,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=Annotated[
                        item_type(arg.item) | None,
                        strawberry.argument(
                            description=f"One of `{name}`.",
                            deprecation_reason=f"Use `{name}`, which takes a list.",
                        ),
                    ],
                )
            )
    return params


def domain_values(args: tuple[Arg, ...], passed: Mapping[str, Any]) -> dict[str, Any]:
    """What the caller passed, as the records hold it: ids as UUIDs, orders as `Order`."""
    values = dict(passed)
    for arg in args:
        value = values.get(arg.name)
        if value is None:
            continue
        if arg.held is uuid.UUID:
            values[arg.name] = parse_id(value, argument=graphql_name(arg))
        elif arg.held is Order:
            values[arg.name] = value.to_domain()
    return values


def build(record: type[T], passed: Mapping[str, Any]) -> T:
    return requests.build(record, domain_values(requests.arguments(record), passed))


Resolver = Callable[..., Awaitable[Any]]


def takes_records(*, former_names: bool = False) -> Callable[[Resolver], Resolver]:
    """A resolver's parameters annotated with a record of `memql.requests` replaced by the
    record's arguments (with `former_names`, their deprecated former names too); it is called
    with the records built from them."""

    def generate(resolver: Resolver) -> Resolver:
        signature = inspect.signature(resolver, eval_str=True)
        kept: list[inspect.Parameter] = []
        taken: dict[str, type] = {}
        for param in signature.parameters.values():
            if param.annotation in requests.RECORDS:
                taken[param.name] = param.annotation
            else:
                kept.append(param)
        generated = parameters(*taken.values(), former_names=former_names)
        names = {p.name for p in generated}

        @functools.wraps(resolver)
        async def resolve(*args: Any, **kwargs: Any) -> Any:
            passed = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
            for name, record in taken.items():
                kwargs[name] = build(record, passed)
            return await resolver(*args, **kwargs)

        # the generated arguments before the resolver's own keyword-only ones
        own = [p for p in kept if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        keyword = [p for p in kept if p.kind is inspect.Parameter.KEYWORD_ONLY]
        generated_signature = signature.replace(parameters=[*own, *generated, *keyword])
        resolve.__signature__ = generated_signature  # type: ignore[attr-defined]
        resolve.__annotations__ = {
            p.name: p.annotation for p in generated_signature.parameters.values()
        } | {"return": signature.return_annotation}
        return resolve

    return generate


C = TypeVar("C", bound=type)


def fields_of(record: type) -> Callable[[C], C]:
    """A class decorator (under `strawberry.input`) giving the input type a field for each
    of `record`'s arguments."""

    def add(cls: C) -> C:
        annotations: dict[str, Any] = {}
        for arg in requests.arguments(record):
            annotations[arg.name] = annotation(arg)
            shown = default(arg)
            extra: dict[str, Any] = {}
            if isinstance(shown, list):
                extra["default_factory"] = functools.partial(list, shown)
            elif shown is not REQUIRED:
                extra["default"] = shown
            name = graphql_name(arg)
            setattr(
                cls,
                arg.name,
                strawberry.field(
                    name=name if name != camel(arg.name) else None,
                    description=description(arg),
                    **extra,
                ),
            )
        cls.__annotations__ = annotations
        return cls

    return add


def record_of(record: type[T], value: Any) -> T:
    """The record an input type of `fields_of(record)` holds."""
    passed = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return build(record, passed)
