"""One write budget per request, whatever its shape.

The batch limit caps one `saveMemories`, but aliases repeat fields: thirty aliased batches of 100
would write 3,000 memories in one request. So before a mutation runs, its writes are counted
over the whole operation (every field and alias, fragments included; `saveMemories` counts its
inputs, every other mutation field one) and an operation over the budget is refused with
BAD_USER_INPUT before anything is written. Fields under `@skip`/`@include` are counted too: the
count may be high, never low. A variable the request leaves out counts at its declared default
(a default list of 100 inputs, aliased, would write 100 a field).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from graphql import (
    DocumentNode,
    ExecutionResult,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    value_from_ast_untyped,
)
from graphql.pyutils import Undefined
from graphql.utilities import get_operation_ast
from strawberry.extensions import SchemaExtension

from memql.errors import BadInput

BATCH_FIELD, BATCH_ARGUMENT = "saveMemories", "inputs"


def count_writes(
    document: DocumentNode, operation_name: str | None, variables: Mapping[str, Any] | None
) -> int:
    """The memories a mutation would write at most; 0 for a query or subscription."""
    operation = get_operation_ast(document, operation_name)
    if operation is None or operation.operation is not OperationType.MUTATION:
        return 0
    values = variable_values(operation, variables)
    return sum_root_fields(document, operation, lambda field: field_writes(field, values))


def sum_root_fields(
    document: DocumentNode,
    operation: OperationDefinitionNode,
    per_field: Callable[[FieldNode], int],
) -> int:
    """The sum of `per_field` over the fields `operation` selects at its top, those of its
    inline fragments and fragments included (a fragment spread inside itself is not expanded
    again)."""
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }

    def total(selection_set: SelectionSetNode, spread: frozenset[str]) -> int:
        found = 0
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                found += per_field(selection)
            elif isinstance(selection, InlineFragmentNode):
                found += total(selection.selection_set, spread)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                if name in fragments and name not in spread:
                    found += total(fragments[name].selection_set, spread | {name})
        return found

    return total(operation.selection_set, frozenset())


def variable_values(
    operation: OperationDefinitionNode, variables: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The operation's variables as the request gives them, each one it leaves out at the
    default the operation declares for it (as execution will see them)."""
    values = {
        d.variable.name.value: value_from_ast_untyped(d.default_value)
        for d in operation.variable_definitions or ()
        if d.default_value is not None
    }
    return {**values, **(variables or {})}


def argument(field: FieldNode, name: str, values: Mapping[str, Any]) -> Any:
    """The value of `field`'s argument `name` (a literal, or a variable among `values`, the
    result of `variable_values`); None when it is not given."""
    node = next((a.value for a in field.arguments or () if a.name.value == name), None)
    if node is None:
        return None
    value = value_from_ast_untyped(node, dict(values))
    return None if value is Undefined else value


def field_writes(field: FieldNode, values: Mapping[str, Any]) -> int:
    """The memories one mutation field writes at most: `saveMemories` its inputs (a single
    input object is a list of one), any other field one."""
    if field.name.value == "__typename":
        return 0
    if field.name.value != BATCH_FIELD:
        return 1
    given = argument(field, BATCH_ARGUMENT, values)
    return len(given) if isinstance(given, list) else 1


class WriteBudget(SchemaExtension):
    """Refuses, before execution, a mutation that would write more than `max_writes` memories."""

    def __init__(self, *, max_writes: int) -> None:
        self.max_writes = max_writes

    def on_execute(self) -> Iterator[None]:
        context = self.execution_context
        if context.graphql_document is not None:
            writes = count_writes(
                context.graphql_document, context.operation_name, context.variables
            )
            if writes > self.max_writes:
                refusal = BadInput(
                    f"one request may write at most {self.max_writes} memories, across all its"
                    f" fields and aliases; this one would write {writes}",
                    limit=self.max_writes,
                )
                # a result set here replaces execution: nothing runs, nothing is written
                context.result = ExecutionResult(
                    data=None, errors=[GraphQLError(refusal.message, original_error=refusal)]
                )
        yield
