"""Each assumption `memql.graphql.strawberry_internals` makes of Strawberry's internals, checked
against the installed Strawberry: an upgrade that breaks one fails here, by name, before any
server test does."""

from __future__ import annotations

import inspect

import strawberry
from graphql import GraphQLSchema, parse, specified_rules
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL

from memql.graphql import strawberry_internals as internals


def parameters(function: object) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


def test_transport_ws_handler_is_generic_in_context_and_root_value():
    parameters_ = internals.BaseGraphQLTransportWSHandler.__parameters__
    assert len(parameters_) == 2
    assert {"websocket", "context"} <= set(parameters(internals.BaseGraphQLTransportWSHandler))


def test_transport_ws_handler_takes_connection_init_and_refuses_with_4403():
    hook = internals.BaseGraphQLTransportWSHandler.handle_connection_init
    assert inspect.iscoroutinefunction(hook)
    assert parameters(hook) == ["message"]
    assert "4403" in inspect.getsource(hook)


def test_transport_ws_handler_runs_each_operation_through_run_operation():
    hook = internals.BaseGraphQLTransportWSHandler.run_operation
    assert inspect.iscoroutinefunction(hook)
    assert parameters(hook) == ["operation"]
    assert "id" in parameters(internals.Operation)


def test_legacy_ws_handler_runs_each_operation_through_handle_async_results():
    hook = internals.BaseGraphQLWSHandler.handle_async_results
    assert inspect.iscoroutinefunction(hook)
    assert parameters(hook) == ["operation_id", "query", "operation_name", "variables"]


def test_websocket_adapter_is_built_from_the_view_and_asks_for_three_methods():
    adapter = internals.AsyncWebSocketAdapter
    assert parameters(adapter) == ["view"]
    assert adapter.__abstractmethods__ == {"iter_json", "send_json", "close"}
    assert parameters(adapter.close) == ["code", "reason"]
    assert parameters(adapter.iter_json) == ["ignore_parsing_errors"]


def test_the_asgi_adapter_keeps_starlettes_socket_as_ws():
    socket = object()
    adapter = ASGIWebSocketAdapter(GraphQL(strawberry.Schema(query=_Query)), socket, socket)
    assert adapter.ws is socket


def test_the_asgi_view_checks_a_batch_in_validate_batch_request():
    assert parameters(GraphQL._validate_batch_request) == ["request_data", "protocol"]


def test_the_execution_context_executes_an_operation_in_execute_operation():
    base = internals.StrawberryGraphQLCoreExecutionContext
    assert parameters(base.execute_operation) == ["serially"]
    seen = []

    class Counting(base):
        def execute_operation(self, serially=None):
            seen.append(self.operation.operation.value)
            return super().execute_operation(serially)

    schema = strawberry.Schema(query=_Query, execution_context_class=Counting)
    assert schema.execute_sync("{ ok }", root_value=_Query()).data == {"ok": True}
    assert seen == ["query"]


def test_a_schema_keeps_its_graphql_core_schema_and_validate_document_checks_against_it():
    core = internals.core_schema(strawberry.Schema(query=_Query))
    assert isinstance(core, GraphQLSchema)
    rules = tuple(specified_rules)
    assert internals.validate_document(core, parse("{ ok }"), rules) == []
    [error] = internals.validate_document(core, parse("{ missing }"), rules)
    assert "missing" in error.message


def test_is_private_tells_a_private_field():
    assert internals.is_private(strawberry.Private[int])
    assert not internals.is_private(int)


def test_to_camel_case_names_a_field_as_the_schema_does():
    assert internals.to_camel_case("source_thread_ids") == "sourceThreadIds"
    assert "sourceThreadIds" in str(strawberry.Schema(query=_Named))


@strawberry.type
class _Query:
    ok: bool = True


@strawberry.type
class _Named:
    source_thread_ids: list[str] = strawberry.field(default_factory=list)
