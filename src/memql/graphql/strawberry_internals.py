"""Strawberry's internals that memql builds on, imported here and nowhere else. Each is outside
Strawberry's documented API, so an upgrade may move or change it; every assumption memql makes
of them is listed here and checked against the installed Strawberry, one unit test each
(tests/unit/test_strawberry_internals.py):

- `BaseGraphQLTransportWSHandler` (graphql-transport-ws) is generic in (context, root value),
  keeps its socket adapter in `websocket` and the context in `context`, handles a
  `connection_init` in `handle_connection_init(message)` and closes a refused one with 4403,
  and runs each operation in its own task through `run_operation(operation)`, where the
  `Operation` carries its `id` (`asgi.TransportWSHandler`).
- `BaseGraphQLWSHandler` (the legacy graphql-ws) runs each operation through
  `handle_async_results(operation_id, query, operation_name, variables)` (`asgi.LegacyWSHandler`).
- `AsyncWebSocketAdapter` is built from the view (`__init__(view)`) and asks a subclass for
  `iter_json`, `send_json` and `close(code, reason)` only; the ASGI adapter keeps Starlette's
  socket as `ws` (`asgi._RetryLaterSocket`, the live sinks).
- `strawberry.asgi.GraphQL` checks a batch in `_validate_batch_request(request_data, protocol)`
  (`asgi.GraphQLApp`).
- `StrawberryGraphQLCoreExecutionContext` is the execution context a schema's
  `execution_context_class` replaces, and executes an operation in
  `execute_operation(serially=None)` (`rendering.RenderOnce`).
- `validate_document(schema, document, rules)` validates a parsed document as Strawberry does,
  on the graphql-core schema a Strawberry schema keeps as `_schema` (`core_schema`;
  `documents.Documents`).
- `is_private(annotation)` tells a `strawberry.Private` field, and `to_camel_case` names a
  field as the schema does (`webhook_payload`).
"""

from __future__ import annotations

from typing import Any, cast

from graphql import GraphQLSchema
from strawberry.http.async_base_view import AsyncWebSocketAdapter
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext, validate_document
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import ConnectionInitMessage
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.types.private import is_private
from strawberry.utils.str_converters import to_camel_case

__all__ = [
    "AsyncWebSocketAdapter",
    "BaseGraphQLTransportWSHandler",
    "BaseGraphQLWSHandler",
    "ConnectionInitMessage",
    "Operation",
    "StrawberryGraphQLCoreExecutionContext",
    "core_schema",
    "is_private",
    "to_camel_case",
    "validate_document",
]


def core_schema(schema: Any) -> GraphQLSchema:
    """The graphql-core schema a Strawberry schema executes."""
    return cast(GraphQLSchema, schema._schema)
