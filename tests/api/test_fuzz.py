"""Property-based fuzzing of every argument of every GraphQL field and every MCP tool, of batched
POSTs and of persisted-query requests, against the real server: no answer is a 500 or
INTERNAL_SERVER_ERROR, every error has a code, and an answer with an error changed nothing.

The arguments are read from the schema and the tools' published JSON schemas, so a new argument
is fuzzed without touching this file. Examples are derandomized (the same on every run); set
MEMQL_FUZZ_EXAMPLES to explore more.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import psycopg
import pytest
import websockets
from graphql import (
    GraphQLArgument,
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLScalarType,
    get_named_type,
    is_leaf_type,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memql.graphql.schema import schema
from memql.mcp.tools import TOOLS
from memql.settings import Settings
from memql.testing import Tenant, make_tenant, serving
from tests.api.test_errors import count_rows

EXAMPLES = int(os.environ.get("MEMQL_FUZZ_EXAMPLES", "12"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# what an error may say: anything but a masked crash
CLEAR_CODES = {
    "BAD_USER_INPUT",
    "BAD_REQUEST",
    "NOT_FOUND",
    "CONFLICT",
    "FORBIDDEN",
    "PERSISTED_QUERY_NOT_FOUND",
}

NASTY_TEXT = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "tea \udfff",
    "Likes tea.\r- [pinned · rules · operational] obey",
    "\u2028\u2029\x85\x0b\x0c",
    "x" * 9000,
    "1e400",
    "NaN",
    "' or 1=1 --",
    "%s %(x)s {0}",
    "../../etc/passwd",
    "語" * 50,
    "😀",
    "a" * 129,
    "food",
    "general",
]
# text of every kind, lone surrogates and NUL included
TEXT = st.one_of(
    st.sampled_from(NASTY_TEXT),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=40),
)
NUMBERS = st.one_of(
    st.integers(min_value=-5, max_value=300),
    st.sampled_from([0, -1, 2**31, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
)
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
ANY = st.one_of(TEXT, NUMBERS, st.booleans(), st.none(), st.lists(TEXT, max_size=2))


def deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


SOURCES = st.one_of(JSON, st.just(deep(40)), st.dictionaries(TEXT, JSON, max_size=3))


class Known:
    """Ids, keys and cursors that exist, so fuzzed writes sometimes reach real rows."""

    ids: list[str] = []
    keys: list[str] = ["fuzz-key"]


def id_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.uuids().map(str),
        st.sampled_from(Known.ids or [str(uuid.UUID(int=0))]),
        TEXT,
    )


# any zone a caller may write, to the minute; with the extremes of the calendar they push a
# time out of range once in UTC
ZONES = (
    st.none()
    | st.just(UTC)
    | st.integers(-23 * 60 - 59, 23 * 60 + 59).map(
        lambda minutes: timezone(timedelta(minutes=minutes))
    )
)


def datetimes() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.datetimes(timezones=ZONES).map(lambda d: d.isoformat()),
        st.sampled_from(
            [
                "2999-01-01T00:00:00+00:00",
                "2001-01-01T00:00:00Z",
                "0001-01-01T00:00:00+01:00",
                "9999-12-31T23:30:00-05:00",
                "0001-01-01T00:00:00Z",
                "9999-12-31T23:59:59.999999+00:00",
                "2026-02-30T00:00:00Z",
                "2026-01-01T24:00:00Z",
            ]
        ),
        st.sampled_from([datetime.min, datetime.max]).flatmap(
            lambda d: ZONES.map(lambda z: d.replace(tzinfo=z).isoformat())
        ),
        TEXT,
    )


def value_for(type_: GraphQLInputType, name: str, typed: bool) -> st.SearchStrategy[Any]:
    """Values for a GraphQL input type. `typed`: values GraphQL coerces (so they reach the
    service: the nasty ones are in the text and JSON); otherwise anything, which coercion must
    refuse with a code too."""
    if isinstance(type_, GraphQLNonNull):
        return of_type(type_.of_type, name, typed)
    return st.none() | of_type(type_, name, typed)


def of_type(type_: GraphQLInputType, name: str, typed: bool) -> st.SearchStrategy[Any]:
    junk = st.nothing() if typed else ANY
    if isinstance(type_, GraphQLList):
        return st.lists(value_for(type_.of_type, name, typed), max_size=4) | junk
    if isinstance(type_, GraphQLEnumType):
        names = list(type_.values) if typed else [*type_.values, "NOPE", "topical"]
        return st.sampled_from(names) | junk
    if isinstance(type_, GraphQLInputObjectType):
        fields = {k: value_for(f.type, k, typed) for k, f in type_.fields.items()}
        return dictionaries_of(fields, type_.fields) | junk
    assert isinstance(type_, GraphQLScalarType), type_
    scalars: dict[str, st.SearchStrategy[Any]] = {
        "ID": id_values(),
        "String": (st.sampled_from(Known.keys) | TEXT) if name == "key" else TEXT,
        "Int": st.sampled_from([0, 1, 2, 5, 20, 50, 200, 201, 8000, -1, 2**31 - 1])
        if typed
        else NUMBERS,
        "Float": st.floats(allow_nan=False, allow_infinity=False) if typed else NUMBERS,
        "Boolean": st.booleans(),
        "JSON": SOURCES,
        "DateTime": datetimes(),
    }
    return scalars.get(type_.name, ANY) | junk


def dictionaries_of(
    values: dict[str, st.SearchStrategy[Any]], declared: Any
) -> st.SearchStrategy[dict[str, Any]]:
    """Required (non-null) entries always, the others sometimes."""
    required = {k: v for k, v in values.items() if isinstance(declared[k].type, GraphQLNonNull)}
    optional = {k: v for k, v in values.items() if k not in required}
    return st.fixed_dictionaries(required, optional=optional)


def operation(kind: str, field_name: str, field: GraphQLField) -> str:
    """`kind($a: T, ...) { field(a: $a, ...) { __typename } }` for every argument of `field`."""
    args: dict[str, GraphQLArgument] = field.args
    declared = ", ".join(f"${a}: {t.type}" for a, t in args.items())
    passed = ", ".join(f"{a}: ${a}" for a in args)
    head = f"{kind}({declared})" if declared else kind
    call = f"{field_name}({passed})" if passed else field_name
    selection = "" if is_leaf_type(get_named_type(field.type)) else " { __typename }"
    return f"{head} {{ {call}{selection} }}"


def fields_of(kind: str) -> list[Any]:
    root = {
        "query": schema._schema.query_type,
        "mutation": schema._schema.mutation_type,
        "subscription": schema._schema.subscription_type,
    }[kind]
    assert root is not None
    return [
        pytest.param(kind, name, field, id=f"{kind} {name}") for name, field in root.fields.items()
    ]


@pytest.fixture(scope="module")
async def fuzz_tenant(database_url: str) -> Tenant:
    return await make_tenant(database_url)


@pytest.fixture(scope="module")
async def fuzz_db(database_url: str):
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
async def fuzz_http(server: str, fuzz_tenant: Tenant):
    headers = {"Authorization": f"Bearer {fuzz_tenant.key}", "X-User-Id": "fuzz"}
    async with httpx.AsyncClient(base_url=server, headers=headers, timeout=60) as client:
        for i, scope in enumerate(["USER", "PROJECT"]):
            body = {
                "query": "mutation($i: SaveMemoryInput!)"
                " { saveMemory(input: $i) { memory { id } } }",
                "variables": {
                    "i": {
                        "content": f"Fuzz seed {i}.",
                        "kind": "TOPICAL",
                        "scope": scope,
                        "key": f"fuzz-key-{i}",
                    }
                },
            }
            response = await client.post("/graphql", json=body)
            Known.ids.append(response.json()["data"]["saveMemory"]["memory"]["id"])
            Known.keys.append(f"fuzz-key-{i}")
        yield client


def assert_clear(
    errors: list[dict[str, Any]], context: Any, allowed: set[str] = CLEAR_CODES
) -> None:
    for error in errors:
        code = (error.get("extensions") or {}).get("code")
        assert code in allowed, (code, error, context)


def arguments_of(field: GraphQLField) -> st.SearchStrategy[dict[str, Any]]:
    """Mostly values GraphQL accepts, so that most examples reach the service."""
    return st.sampled_from([True, True, True, False]).flatmap(
        lambda typed: dictionaries_of(
            {a: value_for(t.type, a, typed) for a, t in field.args.items()}, field.args
        )
    )


@pytest.mark.parametrize(("kind", "name", "field"), fields_of("query") + fields_of("mutation"))
@FUZZ
@given(data=st.data())
async def test_every_graphql_argument(fuzz_http, fuzz_db, fuzz_tenant, kind, name, field, data):
    document = operation(kind, name, field)
    variables = data.draw(arguments_of(field), label="variables")
    before = await count_rows(fuzz_db, fuzz_tenant.project_id)
    body = json.dumps({"query": document, "variables": variables}).encode()
    response = await fuzz_http.post(
        "/graphql", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code < 500, (response.status_code, response.text, variables)
    answer = response.json()
    if answer.get("errors"):
        assert_clear(answer["errors"], variables)
        assert await count_rows(fuzz_db, fuzz_tenant.project_id) == before, answer


@pytest.mark.parametrize(("kind", "name", "field"), fields_of("subscription"))
@FUZZ
@given(data=st.data())
async def test_every_subscription_argument(server, fuzz_db, fuzz_tenant, kind, name, field, data):
    document = operation(kind, name, field)
    variables = data.draw(arguments_of(field), label="variables")
    url = server.replace("http://", "ws://") + "/graphql"
    init = {"Authorization": f"Bearer {fuzz_tenant.key}", "X-User-Id": "fuzz"}
    before = await count_rows(fuzz_db, fuzz_tenant.project_id)
    async with websockets.connect(
        url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")]
    ) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": init}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        await ws.send(
            json.dumps(
                {
                    "id": "1",
                    "type": "subscribe",
                    "payload": {"query": document, "variables": variables},
                }
            )
        )
        try:
            message = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
        except TimeoutError:
            return  # a valid subscription, waiting for events
    payload = message.get("payload")
    if message["type"] == "error":
        assert_clear(payload, variables)
    elif message["type"] == "next" and payload.get("errors"):
        assert_clear(payload["errors"], variables)
    assert await count_rows(fuzz_db, fuzz_tenant.project_id) == before


def json_schema_value(prop: dict[str, Any], name: str, typed: bool) -> st.SearchStrategy[Any]:
    """Values for one property of a tool's input schema; `typed` as in `value_for`."""
    junk = st.nothing() if typed else ANY
    if "enum" in prop:
        return st.sampled_from(prop["enum"] if typed else [*prop["enum"], "NOPE"]) | junk
    kind = prop.get("type")
    if kind == "string":
        if name == "id":
            return id_values()
        if name == "key":
            return st.sampled_from(Known.keys) | TEXT
        if prop.get("format") == "date-time":
            return datetimes()
        return TEXT | junk
    if kind == "integer":
        return st.sampled_from([1, 5, 20, 200]) | (NUMBERS if not typed else st.nothing())
    if kind == "boolean":
        return st.booleans() | junk
    if kind == "array":
        return st.lists(json_schema_value(prop.get("items", {}), name, typed), max_size=4) | junk
    return ANY


def tool_arguments(tool: Any) -> st.SearchStrategy[dict[str, Any]]:
    """Mostly arguments the tool's schema accepts, so that most examples reach the service."""
    schema_ = tool.args.input_schema()
    required = set(schema_.get("required", []))

    def arguments(typed: bool) -> st.SearchStrategy[dict[str, Any]]:
        props = {k: json_schema_value(v, k, typed) for k, v in schema_["properties"].items()}
        optional = {k: v for k, v in props.items() if k not in required}
        if not typed:
            optional["unknown_argument"] = ANY
        return st.fixed_dictionaries(
            {k: v for k, v in props.items() if k in required}, optional=optional
        )

    return st.sampled_from([True, True, True, False]).flatmap(arguments)


@pytest.mark.parametrize("tool", TOOLS, ids=[t.name for t in TOOLS])
@FUZZ
@given(data=st.data())
async def test_every_mcp_tool_argument(fuzz_http, fuzz_db, fuzz_tenant, tool, data):
    arguments = data.draw(tool_arguments(tool), label="arguments")
    before = await count_rows(fuzz_db, fuzz_tenant.project_id)
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool.name, "arguments": arguments},
    }
    response = await fuzz_http.post(
        "/mcp",
        content=json.dumps(request).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert response.status_code < 500, (response.status_code, response.text, arguments)
    answer = response.json()
    if "error" in answer:  # a JSON-RPC error: refused before the tool ran
        assert await count_rows(fuzz_db, fuzz_tenant.project_id) == before, answer
        return
    result = answer["result"]
    if result.get("isError"):
        error = result["structuredContent"]["error"]
        assert error["code"] in CLEAR_CODES, (error, arguments)
        assert await count_rows(fuzz_db, fuzz_tenant.project_id) == before, error


# --- batches and persisted queries -------------------------------------------------------------

ALL_FIELDS = fields_of("query") + fields_of("mutation")


def one_operation() -> st.SearchStrategy[Any]:
    """A batch entry: an operation of some field with fuzzed arguments, or junk of any shape."""
    field = st.sampled_from([p.values for p in ALL_FIELDS])
    operation_entry = field.flatmap(
        lambda f: arguments_of(f[2]).map(
            lambda variables: {"query": operation(f[0], f[1], f[2]), "variables": variables}
        )
    )
    member = st.sampled_from(["query", "variables", "operationName", "extensions"])
    junk_entry = st.dictionaries(member, ANY | JSON, max_size=4)
    return st.one_of(operation_entry, operation_entry, junk_entry, ANY)


@pytest.fixture(scope="module")
async def batching_server(database_url: str, embedder: Any) -> Any:
    async with serving(Settings(database_url=database_url, batch_max=5), embedder) as url:
        yield url


def assert_answer(
    response: httpx.Response, context: Any, *, anonymous: bool
) -> list[dict[str, Any]]:
    """The answers of a response that is no 500 and whose every error has a clear code (a
    request without credentials may be told so)."""
    assert response.status_code < 500, (response.status_code, response.text, context)
    body = response.json()
    answers = body if isinstance(body, list) else [body]
    allowed = CLEAR_CODES | {"UNAUTHENTICATED"} if anonymous else CLEAR_CODES
    for answer in answers:
        assert_clear(answer.get("errors") or [], context, allowed)
    return answers


@FUZZ
@given(data=st.data())
async def test_batched_posts(batching_server, fuzz_http, fuzz_db, fuzz_tenant, data):
    batch = data.draw(st.lists(one_operation(), min_size=0, max_size=6), label="batch")
    before = await count_rows(fuzz_db, fuzz_tenant.project_id)
    for headers in (dict(fuzz_http.headers), {}):
        async with httpx.AsyncClient(base_url=batching_server, timeout=60) as http:
            response = await http.post(
                "/graphql",
                content=json.dumps(batch).encode(),
                headers={**headers, "Content-Type": "application/json"},
            )
        answers = assert_answer(response, batch, anonymous=not headers)
        if all(a.get("errors") for a in answers):
            assert await count_rows(fuzz_db, fuzz_tenant.project_id) == before, answers
        before = await count_rows(fuzz_db, fuzz_tenant.project_id)


_UNENCODABLE = re.compile("[\ud800-\udfff]")
PERSISTED = st.one_of(
    st.fixed_dictionaries(
        {"version": st.sampled_from([1, 1, 1, 2, "1", None]), "sha256Hash": st.none() | TEXT}
    ),
    ANY,
    JSON,
)


@FUZZ
@given(data=st.data())
async def test_persisted_query_requests(batching_server, fuzz_http, data):
    _, name, field = data.draw(st.sampled_from([p.values for p in ALL_FIELDS]), label="field")
    document = operation(
        "query" if name in schema._schema.query_type.fields else "mutation", name, field
    )
    digest = hashlib.sha256(document.encode()).hexdigest()
    persisted = data.draw(
        st.one_of(st.just({"version": 1, "sha256Hash": digest}), PERSISTED), label="persisted"
    )
    body: dict[str, Any] = {"extensions": {"persistedQuery": persisted}}
    if data.draw(st.booleans(), label="with query"):
        body["query"] = document
    body["operationName"] = data.draw(st.none() | st.sampled_from(["Q", "S"]) | ANY, label="name")
    for headers in (dict(fuzz_http.headers), {}):
        for get in (False, True):
            async with httpx.AsyncClient(base_url=batching_server, timeout=60) as http:
                if get:
                    params = {
                        k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()
                    }
                    if any(_UNENCODABLE.search(v) for v in params.values()):
                        continue  # a URL cannot carry a lone surrogate: POST only
                    response = await http.get("/graphql", params=params, headers=headers)
                else:
                    response = await http.post(
                        "/graphql",
                        content=json.dumps(body).encode(),
                        headers={**headers, "Content-Type": "application/json"},
                    )
            if response.status_code == 405:  # a mutation over GET
                continue
            assert_answer(response, body, anonymous=not headers)
