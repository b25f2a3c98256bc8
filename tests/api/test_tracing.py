"""Tracing against a real server (real HTTP, real PostgreSQL, a real webhook receiver on
loopback), its spans collected by the OpenTelemetry SDK's in-memory exporter: which spans a
request makes and how they nest, what they never carry, and the `traceparent` a webhook
delivery sends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from memql import spans as memql_spans
from memql.settings import Settings
from memql.testing import (
    GraphQLClient,
    HashEmbedder,
    Receiver,
    fresh_database,
    make_tenant,
    serving,
    webhook_receiver,
)
from tests.operations import SAVE
from tests.ws import EventSubscription

ADD_WEBHOOK = """
mutation Add($url: String!) { addWebhook(url: $url) { webhook { id } } }
"""
RECALL = "query Recall($q: String!) { recall(query: $q, limit: 3) { score memory { id } } }"
# text no span may carry: it reaches the server only as variables
SECRET_CONTENT = "Keeps the spare key under the blue flower pot"
SECRET_QUERY = "where is the spare key kept"


async def until(condition: Callable[[], bool], within: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.02)


class Traced:
    def __init__(self, base: str, exporter: InMemorySpanExporter, http: httpx.AsyncClient):
        self.base = base
        self.exporter = exporter
        self.http = http

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


@pytest.fixture(scope="module")
async def traced_db(postgres: str) -> AsyncIterator[str]:
    # a database of its own: its deliverer is this server's, not another test server's
    async with fresh_database(postgres) as url:
        yield url


@pytest.fixture(scope="module")
async def traced(traced_db: str, hash_embedder: HashEmbedder) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = Settings(
        database_url=traced_db,
        pool_min_size=1,
        pool_max_size=4,
        webhooks_allow_private=True,
        webhooks_backoff_min=0.05,
        webhooks_backoff_max=0.3,
    )
    async with (
        serving(settings, hash_embedder, tracer_provider=provider) as base,
        httpx.AsyncClient(base_url=base, timeout=60) as http,
    ):
        yield Traced(base, exporter, http)
    # the server's end turns memql's own spans off again
    assert not memql_spans.active()


def by_id(found: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in found}


def ancestors(span: ReadableSpan, index: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    chain = []
    while span.parent is not None and span.parent.span_id in index:
        span = index[span.parent.span_id]
        chain.append(span)
    return chain


def is_statement(span: ReadableSpan) -> bool:
    return (span.attributes or {}).get("db.system") == "postgresql" or (span.attributes or {}).get(
        "db.system.name"
    ) == "postgresql"


def request_span(found: list[ReadableSpan], path: str) -> ReadableSpan:
    [span] = [
        s
        for s in found
        if s.kind is SpanKind.SERVER
        and s.instrumentation_scope is not None
        and s.instrumentation_scope.name == "opentelemetry.instrumentation.asgi"
        and path in s.name
    ]
    return span


async def test_a_request_is_one_trace_its_statements_under_the_operation_under_the_request(
    traced: Traced, traced_db: str
):
    tenant = await make_tenant(traced_db)
    alice = GraphQLClient(traced.http, tenant.key, "alice")
    traced.exporter.clear()
    saved = await alice.ok(SAVE, {"input": {"content": SECRET_CONTENT, "kind": "TOPICAL"}})
    assert saved["saveMemory"]["outcome"] == "CREATED"

    found = traced.spans()
    index = by_id(found)
    request = request_span(found, "POST /graphql")
    assert request.parent is None  # the client sent no trace context: a trace of its own
    assert request.attributes is not None
    assert (
        request.attributes.get(
            "http.response.status_code", request.attributes.get("http.status_code")
        )
        == 200
    )
    trace_id = request.context.trace_id
    [operation] = [s for s in found if s.name == "GraphQL Query: Save"]
    assert operation.parent is not None and operation.parent.span_id == request.context.span_id
    [resolver] = [s for s in found if s.name == "GraphQL Resolving: saveMemory"]
    assert operation in ancestors(resolver, index)

    statements = [s for s in found if is_statement(s)]
    assert statements, "no database statement was traced"
    for statement in statements:
        assert statement.context.trace_id == trace_id
        assert request in ancestors(statement, index), statement.name
    # the write itself runs in the resolver, the credentials' look-up before the operation
    under_operation = [s for s in statements if operation in ancestors(s, index)]
    assert any(
        "insert into memories" in str((s.attributes or {}).get("db.statement", "")).lower()
        for s in under_operation
    ), [s.attributes for s in under_operation]

    [embed] = [s for s in found if s.name == "memql.embed"]
    assert resolver in ancestors(embed, index)
    assert embed.attributes is not None
    assert embed.attributes["memql.embed.texts"] == 1
    assert embed.attributes["memql.embedder.model"] == HashEmbedder().model

    # what a caller wrote (the content, in variables) is on no span
    for span in found:
        for value in (span.attributes or {}).values():
            assert SECRET_CONTENT not in str(value), (span.name, value)


async def test_a_recall_traces_its_statements_and_keeps_the_query_text_off_the_spans(
    traced: Traced, traced_db: str
):
    tenant = await make_tenant(traced_db)
    alice = GraphQLClient(traced.http, tenant.key, "alice")
    await alice.ok(SAVE, {"input": {"content": SECRET_CONTENT, "kind": "TOPICAL"}})
    traced.exporter.clear()
    await alice.ok(RECALL, {"q": SECRET_QUERY})
    found = traced.spans()
    index = by_id(found)
    request = request_span(found, "POST /graphql")
    [resolver] = [s for s in found if s.name == "GraphQL Resolving: recall"]
    assert resolver.attributes is not None
    # the numbers of the arguments are kept, the text is not
    assert resolver.attributes.get("graphql.param.limit") == 3
    assert "graphql.param.query" not in resolver.attributes
    assert any(is_statement(s) and resolver in ancestors(s, index) for s in found)
    assert all(request in ancestors(s, index) for s in found if is_statement(s))
    for span in found:
        for value in (span.attributes or {}).values():
            assert SECRET_QUERY not in str(value), (span.name, value)


async def test_probes_make_no_span_and_the_background_polls_no_statement_span(traced: Traced):
    # what the tests before left in flight (an event the relay publishes, on Citus a sweep
    # later) finishes first: a span that ends after the clear would be theirs
    settled, before = 0, -1
    while settled < 10 and len(traced.spans()) != before:
        before = len(traced.spans())
        await asyncio.sleep(0.5)
        settled += 1
    traced.exporter.clear()
    assert (await traced.http.get("/healthz")).status_code == 200
    assert (await traced.http.get("/readyz")).status_code == 200
    # the relay and the deliverer poll the database every half second meanwhile
    await asyncio.sleep(1.5)
    found = [(s.name, dict(s.attributes or {})) for s in traced.spans()]
    assert found == []


async def test_a_webhook_delivery_is_a_span_whose_traceparent_the_receiver_gets(
    traced: Traced, traced_db: str
):
    tenant = await make_tenant(traced_db)
    alice = GraphQLClient(traced.http, tenant.key, "alice")
    receiver: Receiver
    async with webhook_receiver() as receiver:
        await alice.ok(ADD_WEBHOOK, {"url": f"{receiver.url}/hook"})
        traced.exporter.clear()
        await alice.ok(SAVE, {"input": {"content": "Prefers tea to coffee", "kind": "TOPICAL"}})
        await until(lambda: bool(receiver.accepted()), what="the webhook was not delivered")
        [delivered] = receiver.accepted()
        await until(
            lambda: any(s.name == "memql.webhook.deliver" for s in traced.spans()),
            what="the delivery's span did not end",
        )
    traceparent = delivered.headers["traceparent"]
    version, trace_id, span_id, flags = traceparent.split("-")
    assert version == "00"
    assert int(flags, 16) & 0x01  # sampled

    [deliver] = [s for s in traced.spans() if s.name == "memql.webhook.deliver"]
    assert deliver.kind is SpanKind.CLIENT
    assert (f"{deliver.context.trace_id:032x}", f"{deliver.context.span_id:016x}") == (
        trace_id,
        span_id,
    )
    attributes: dict[str, Any] = dict(deliver.attributes or {})
    assert attributes["memql.event.cursor"] == delivered.cursor
    assert attributes["memql.event.type"] == "memory.created"
    assert attributes["http.response.status_code"] == 200
    assert attributes["server.address"] == "127.0.0.1"
    assert deliver.status.is_ok

    # the relay published the same event onto the broadcast, in a span of its own
    await until(
        lambda: any(s.name == "memql.relay.publish" for s in traced.spans()),
        what="no publish span",
    )
    published = [s for s in traced.spans() if s.name == "memql.relay.publish"]
    assert sum(int((s.attributes or {})["memql.events"]) for s in published) >= 1


async def test_a_failed_delivery_is_a_span_in_error_saying_why(traced: Traced, traced_db: str):
    tenant = await make_tenant(traced_db)
    alice = GraphQLClient(traced.http, tenant.key, "alice")
    async with webhook_receiver() as receiver:
        receiver.mode = "fail"
        await alice.ok(ADD_WEBHOOK, {"url": f"{receiver.url}/hook"})
        traced.exporter.clear()
        await alice.ok(SAVE, {"input": {"content": "Walks to work", "kind": "TOPICAL"}})
        await until(
            lambda: any(
                s.name == "memql.webhook.deliver" and not s.status.is_ok for s in traced.spans()
            ),
            what="no failed delivery span",
        )
        receiver.mode = "ok"
        await until(lambda: bool(receiver.accepted()), what="the retry was not delivered")
    failed = next(
        s for s in traced.spans() if s.name == "memql.webhook.deliver" and not s.status.is_ok
    )
    assert failed.status.description == "HTTP 500"
    assert (failed.attributes or {})["http.response.status_code"] == 500
    # each attempt is its own span, each request its own traceparent
    parents = {r.headers["traceparent"] for r in receiver.attempts()}
    assert len(parents) == len(receiver.attempts()) >= 2


async def test_a_subscription_streams_with_tracing_on_its_websocket_is_one_span(
    traced: Traced, traced_db: str
):
    tenant = await make_tenant(traced_db)
    alice = GraphQLClient(traced.http, tenant.key, "alice")
    traced.exporter.clear()
    async with EventSubscription(traced.base, tenant.key, "alice") as subscription:
        await alice.ok(SAVE, {"input": {"content": "Cycles on Sundays", "kind": "TOPICAL"}})
        [event] = await subscription.take(1)
        assert event["type"] == "memory.created"
        assert event["memory"]["content"] == "Cycles on Sundays"

    def websocket() -> list[ReadableSpan]:
        return [s for s in traced.spans() if (s.attributes or {}).get("http.scheme") == "ws"]

    # the connection is one span, ended when it closes; the subscription's operation under it
    await until(lambda: bool(websocket()), what="the websocket's span did not end")
    [connection] = websocket()
    assert connection.kind is SpanKind.SERVER and connection.name == "HTTP /graphql"
    found = traced.spans()
    [resolver] = [s for s in found if s.name == "GraphQL Resolving: memoryEvents"]
    # in the connection's trace; its parent, the subscription's operation span, is not
    # exported: Strawberry does not finish the operation of a subscription its client left
    assert resolver.context.trace_id == connection.context.trace_id
