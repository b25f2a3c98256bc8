"""Every GraphQL error gets an `extensions.code`; unexpected ones are masked and logged with an id."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

from graphql import GraphQLError
from strawberry.extensions import SchemaExtension

from memql.errors import MemqlError

log = logging.getLogger("memql.errors")


def classify(error: GraphQLError) -> GraphQLError:
    original = error.original_error
    if isinstance(original, MemqlError):
        error.extensions = {**(error.extensions or {}), **original.extensions, "code": original.code}
        return error
    if original is None:
        # raised by GraphQL itself: syntax, validation (unknown fields), variable coercion
        error.extensions = {"code": "BAD_USER_INPUT", **(error.extensions or {})}
        return error
    error_id = uuid.uuid4().hex[:12]
    log.error("unexpected error %s at %s", error_id, error.path, exc_info=original)
    return GraphQLError(
        f"Internal server error (error id {error_id})",
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions={"code": "INTERNAL_SERVER_ERROR", "errorId": error_id},
    )


class ErrorCodes(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        yield
        result = self.execution_context.result
        errors = getattr(result, "errors", None)
        if result is not None and errors:
            result.errors = [classify(e) for e in errors]
