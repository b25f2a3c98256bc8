"""Every GraphQL error gets an `extensions.code`; unexpected ones are masked, logged with an id."""

from __future__ import annotations

import logging

from graphql import GraphQLError

from memql.errors import MemqlError, mask, renamed_for
from memql.graphql.arguments import graphql_spelling

log = logging.getLogger("memql.errors")


def classify(error: GraphQLError) -> None:
    """Give `error` its code, in place; mask and log what the caller was not meant to see."""
    original = error.original_error
    if isinstance(original, MemqlError):
        # the domain's names as GraphQL spells them: `source_thread_ids` -> `sourceThreadIds`
        error.message, extensions = renamed_for(original, graphql_spelling)
        error.extensions = {**(error.extensions or {}), **extensions, "code": original.code}
    elif original is None or isinstance(original, GraphQLError) or error.path is None:
        # raised by GraphQL itself, before any resolver ran: syntax, validation (unknown
        # fields), variable coercion (unknown enum values, malformed scalars)
        error.extensions = {"code": "BAD_USER_INPUT", **(error.extensions or {})}
    else:
        masked = mask(original, f"unexpected error at {error.path}", log=log)
        error.message = masked.message
        error.original_error = None
        error.extensions = {"code": masked.code, **masked.extensions}
