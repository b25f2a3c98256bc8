"""One write budget per request, whatever its shape.

The batch limit caps one `saveMemories`, but aliases repeat fields: thirty aliased batches of 100
would write 3,000 memories in one request. So before a mutation runs, its writes are counted
over the whole operation (every field and alias, fragments included; `saveMemories` counts its
inputs, every other mutation field one) and an operation over the budget is refused with
BAD_USER_INPUT before anything is written. Fields under `@skip`/`@include` are counted too: the
count may be high, never low.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from graphql import (
    DocumentNode,
    ExecutionResult,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    ListValueNode,
    OperationType,
    SelectionSetNode,
    ValueNode,
    VariableNode,
)
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
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }

    def writes(selection_set: SelectionSetNode, spread: frozenset[str]) -> int:
        total = 0
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                total += _field_writes(selection, variables or {})
            elif isinstance(selection, InlineFragmentNode):
                total += writes(selection.selection_set, spread)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                if name in fragments and name not in spread:
                    total += writes(fragments[name].selection_set, spread | {name})
        return total

    return writes(operation.selection_set, frozenset())


def _field_writes(field: FieldNode, variables: Mapping[str, Any]) -> int:
    if field.name.value == "__typename":
        return 0
    if field.name.value != BATCH_FIELD:
        return 1
    value: ValueNode | None = next(
        (a.value for a in field.arguments or () if a.name.value == BATCH_ARGUMENT), None
    )
    if isinstance(value, VariableNode):
        given = variables.get(value.name.value)
        return len(given) if isinstance(given, list) else 1
    if isinstance(value, ListValueNode):
        return len(value.values)
    return 1


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
