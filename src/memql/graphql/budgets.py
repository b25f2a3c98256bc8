"""One request's budgets, whatever its shape: a batched POST (a JSON array of operations) is one
request, so its operations share one write budget and one alias and field budget (and, in
`graphql/asgi.py`, one deadline with the database: `db.session.request_deadline`).

Each operation alone is already held to the limits by the schema's guards (`WriteBudget`, the
alias limiter); without this, a batch of 20 would multiply each by 20. The sums are counted
before any operation runs, and a batch over one of them is refused whole: nothing runs, nothing
is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)
from graphql.utilities import get_operation_ast

from memql.errors import BadInput
from memql.graphql.strawberry_internals import count_fields_with_alias
from memql.graphql.write_budget import count_writes

# top-level fields one request may ask for in all its operations: each is one call of the
# service; one operation alone reaches ~40 (its distinct fields and 30 aliases)
MAX_ROOT_FIELDS = 40


@dataclass(frozen=True)
class Budgets:
    """What one request may spend: `max_writes` memories, `max_aliases` aliased fields and
    `max_root_fields` top-level fields (each one call of the service) in all its operations."""

    max_writes: int
    max_aliases: int
    max_root_fields: int


@dataclass(frozen=True)
class Planned:
    """One operation of a batch, parsed: what it would spend."""

    document: DocumentNode
    operation_name: str | None
    variables: Mapping[str, Any] | None


def aliases(document: DocumentNode) -> int:
    """Aliased fields in every operation of `document`, as the alias limiter counts them."""
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    return sum(
        count_fields_with_alias(d, fragments)
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode)
    )


def root_fields(document: DocumentNode, operation_name: str | None) -> int:
    """Top-level fields of the operation that runs (fragments included, `__typename` free)."""
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return 0
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }

    def count(selection_set: SelectionSetNode, spread: frozenset[str]) -> int:
        total = 0
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                total += selection.name.value != "__typename"
            elif isinstance(selection, InlineFragmentNode):
                total += count(selection.selection_set, spread)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                if name in fragments and name not in spread:
                    total += count(fragments[name].selection_set, spread | {name})
        return total

    return count(operation.selection_set, frozenset())


def over_budget(budgets: Budgets, operations: Sequence[Planned]) -> GraphQLError | None:
    """The refusal of a batch whose operations together spend more than one request may."""
    writes = sum(count_writes(o.document, o.operation_name, o.variables) for o in operations)
    if writes > budgets.max_writes:
        return _refusal(
            f"one request may write at most {budgets.max_writes} memories, across all its"
            f" operations, fields and aliases; this batch would write {writes}",
            budgets.max_writes,
        )
    aliased = sum(aliases(o.document) for o in operations)
    if aliased > budgets.max_aliases:
        return _refusal(
            f"one request may hold at most {budgets.max_aliases} aliases across all its"
            f" operations; this batch holds {aliased}",
            budgets.max_aliases,
        )
    fields = sum(root_fields(o.document, o.operation_name) for o in operations)
    if fields > budgets.max_root_fields:
        return _refusal(
            f"one request may ask for at most {budgets.max_root_fields} top-level fields"
            f" across all its operations; this batch asks for {fields}",
            budgets.max_root_fields,
        )
    return None


def _refusal(message: str, limit: int) -> GraphQLError:
    # answered before any operation runs, so the schema's error classifier never sees it
    return GraphQLError(message, extensions={"code": BadInput.code, "limit": limit})
