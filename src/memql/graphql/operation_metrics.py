"""Every GraphQL operation counted and timed, by type and result (`/metrics`)."""

from __future__ import annotations

from collections.abc import Iterator
from time import perf_counter

from strawberry.extensions import SchemaExtension

from memql.metrics import OPERATION_SECONDS, OPERATIONS


class OperationMetrics(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        start = perf_counter()
        yield
        ctx = self.execution_context
        try:
            operation = ctx.operation_type.value
        except (RuntimeError, AttributeError):
            operation = "invalid"
        result = ctx.result
        OPERATIONS.labels(operation, "error" if result and result.errors else "ok").inc()
        OPERATION_SECONDS.labels(operation).observe(perf_counter() - start)
