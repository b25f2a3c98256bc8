"""Every GraphQL error gets an `extensions.code`; unexpected ones are masked, logged with an id."""

from __future__ import annotations

import logging
import uuid

from graphql import GraphQLError

from memql.errors import MemqlError

log = logging.getLogger("memql.errors")


def classify(error: GraphQLError) -> None:
    """Give `error` its code, in place; mask and log what the caller was not meant to see."""
    original = error.original_error
    if isinstance(original, MemqlError):
        error.extensions = {
            **(error.extensions or {}),
            **original.extensions,
            "code": original.code,
        }
    elif original is None or isinstance(original, GraphQLError) or error.path is None:
        # raised by GraphQL itself, before any resolver ran: syntax, validation (unknown
        # fields), variable coercion (unknown enum values, malformed scalars)
        error.extensions = {"code": "BAD_USER_INPUT", **(error.extensions or {})}
    else:
        error_id = uuid.uuid4().hex[:12]
        log.error("unexpected error %s at %s", error_id, error.path, exc_info=original)
        error.message = f"Internal server error (error id {error_id})"
        error.original_error = None
        error.extensions = {"code": "INTERNAL_SERVER_ERROR", "errorId": error_id}
