"""SPEC §4 through real HTTP: the access policy's outcomes, grants honoured exactly, browser
tokens, entitlement, websockets, and row-level security as a second wall."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator

import httpx
import jwt
import psycopg
import pytest
import websockets

from memql.db import tenants
from memql.db.pool import APP_ROLE
from memql.db.session import is_distributed
from memql.settings import Settings
from memql.testing import GraphQLClient, Tenant, make_tenant, serving
from tests.operations import (
    CONTEXT,
    ERASE,
    ERASE_USER,
    GET,
    HISTORY,
    LIST,
    RECALL,
    RESTORE,
    RETIRE,
    SAVE,
    SUPERSEDE,
    contents,
)

VIEWER = "{ viewer { userId consumer grant { user project } } }"


@pytest.fixture(scope="module")
async def policy_server(database_url, embedder) -> AsyncIterator[str]:
    settings = Settings(database_url=database_url, access_policy="tests.policies:by_user")
    async with serving(settings, embedder) as url:
        yield url


@pytest.fixture
async def policy_http(policy_server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=policy_server, timeout=60) as client:
        yield client


def as_user(http: httpx.AsyncClient, tenant: Tenant, user: str) -> GraphQLClient:
    return GraphQLClient(http, tenant.key, user)


async def snapshot(db, project_id) -> tuple:
    """Everything the database holds for a project's memories and events."""
    cur = await db.execute(
        "select id, content, invalidated_at, superseded_by, updated_at, source_thread_ids, pinned"
        " from memories where project_id = %s order by id",
        (project_id,),
    )
    memories = await cur.fetchall()
    cur = await db.execute(
        "select cursor, type, memory_id from memory_events where project_id = %s order by cursor",
        (project_id,),
    )
    return memories, await cur.fetchall()


# --- the policy's outcomes -----------------------------------------------------------------


async def test_no_memory_from_the_policy_is_forbidden_on_every_memory_field(policy_http, tenant):
    client = as_user(policy_http, tenant, "no-memory")
    for query, variables in [
        (LIST, {}),
        (RECALL, {"query": "anything"}),
        (CONTEXT, {}),
        (GET, {"id": "00000000-0000-4000-8000-000000000000"}),
        (SAVE, {"input": {"content": "x", "kind": "TOPICAL"}}),
    ]:
        assert await client.error(query, variables) == "FORBIDDEN"
    viewer = (await client.ok(VIEWER))["viewer"]
    assert viewer["grant"] == {"user": "NONE", "project": "NONE"}


@pytest.mark.parametrize("user", ["no-memory", "grant:user=none,project=none"])
async def test_no_grant_is_forbidden_not_not_found_on_every_operation_by_id(
    policy_http, tenant, db, user
):
    """Whether the memory exists or not: a caller without a grant learns nothing, and is told
    it may not, rather than that there is nothing."""
    owner = as_user(policy_http, tenant, "alice")
    saved = await owner.ok(
        SAVE,
        {"input": {"content": "Shared deploy window.", "kind": "TOPICAL", "scope": "PROJECT"}},
    )
    existing = saved["saveMemory"]["memory"]["id"]
    missing = "00000000-0000-4000-8000-000000000000"
    before = await snapshot(db, tenant.project_id)
    client = as_user(policy_http, tenant, user)
    new = {"content": "Replaced.", "kind": "TOPICAL"}
    for memory_id in (existing, missing):
        for query, variables in [
            (GET, {"id": memory_id}),
            (HISTORY, {"id": memory_id}),
            (RETIRE, {"id": memory_id}),
            (RESTORE, {"id": memory_id}),
            (ERASE, {"id": memory_id}),
            (SUPERSEDE, {"id": memory_id, "input": new}),
        ]:
            assert await client.error(query, variables) == "FORBIDDEN", (query, memory_id)
    for query, variables in [
        (RETIRE, {"key": "deploy-window", "scope": "PROJECT"}),
        (SUPERSEDE, {"key": "deploy-window", "scope": "PROJECT", "input": new}),
        (ERASE_USER, {}),
    ]:
        assert await client.error(query, variables) == "FORBIDDEN", query
    assert await snapshot(db, tenant.project_id) == before


@pytest.mark.parametrize("user", ["forgot-return", "typo", "raises"])
async def test_a_broken_policy_is_a_loud_server_error_and_serves_no_memory(
    policy_http, tenant, db, user, caplog
):
    full = as_user(policy_http, tenant, "alice")
    await full.ok(SAVE, {"input": {"content": "Visible only with a grant.", "kind": "TOPICAL"}})
    before = await snapshot(db, tenant.project_id)
    client = as_user(policy_http, tenant, user)
    with caplog.at_level(logging.ERROR, logger="memql.access"):
        for query, variables in [
            (LIST, {}),
            (SAVE, {"input": {"content": "y", "kind": "TOPICAL"}}),
        ]:
            body = await client.raw(query, variables)
            error = body["errors"][0]
            assert error["extensions"]["code"] == "INTERNAL_SERVER_ERROR"
            assert body["data"] is None
            assert error["extensions"]["errorId"] in caplog.text
    assert "access policy is broken" in caplog.text
    assert await snapshot(db, tenant.project_id) == before


async def test_an_entitlement_withdrawn_answers_404_revealing_nothing(http, tenant, database_url):
    client = GraphQLClient(http, tenant.key, "alice")
    await client.ok(LIST)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await tenants.set_project_entitlement(conn, tenant.project_name, False)
    response = await http.post(
        "/graphql", json={"query": "{ viewer { userId } }"}, headers=client.headers()
    )
    assert response.status_code == 404
    assert "memor" not in response.text.lower()


# --- grants honoured exactly --------------------------------------------------------------


async def test_a_read_only_grant_can_read_and_cannot_write_anything(policy_http, tenant, db):
    writer = as_user(policy_http, tenant, "reader")  # same user id space as "reader"
    full = GraphQLClient(policy_http, tenant.key, "alice")
    shared = (
        await full.ok(
            SAVE,
            {
                "input": {
                    "content": "Shared plan.",
                    "kind": "TOPICAL",
                    "scope": "PROJECT",
                    "key": "plan",
                }
            },
        )
    )["saveMemory"]["memory"]["id"]
    retired = (
        await full.ok(
            SAVE, {"input": {"content": "Old shared plan.", "kind": "TOPICAL", "scope": "PROJECT"}}
        )
    )["saveMemory"]["memory"]["id"]
    await full.ok(RETIRE, {"id": retired})
    before = await snapshot(db, tenant.project_id)
    new = {"content": "Reader's attempt.", "kind": "TOPICAL"}

    assert contents(await writer.ok(LIST)) == ["Shared plan."]
    for query, variables in [
        (SAVE, {"input": new}),
        (SAVE, {"input": {**new, "scope": "PROJECT"}}),
        (SUPERSEDE, {"id": shared, "input": {**new, "scope": "PROJECT"}}),
        (SUPERSEDE, {"key": "plan", "scope": "PROJECT", "input": new}),
        (RETIRE, {"id": shared}),
        (RESTORE, {"id": retired}),
        (ERASE, {"id": shared}),
        (ERASE_USER, {}),
    ]:
        assert await writer.error(query, variables) == "FORBIDDEN", query
    assert await snapshot(db, tenant.project_id) == before
    viewer = (await writer.ok(VIEWER))["viewer"]
    assert viewer["grant"] == {"user": "READ", "project": "READ"}


async def test_a_project_scope_at_none_is_invisible_and_forbidden_by_name(policy_http, tenant):
    full = GraphQLClient(policy_http, tenant.key, "no-project")
    other = GraphQLClient(policy_http, tenant.key, "alice")
    await other.ok(
        SAVE,
        {"input": {"content": "Team deploys on Fridays.", "kind": "TOPICAL", "scope": "PROJECT"}},
    )
    shared_id = (await other.ok(LIST, {"scope": "PROJECT"}))["memories"]["edges"][0]["node"]["id"]
    await full.ok(SAVE, {"input": {"content": "Deploys make me nervous.", "kind": "TOPICAL"}})

    assert contents(await full.ok(LIST)) == ["Deploys make me nervous."]
    hits = (await full.ok(RECALL, {"query": "when do we deploy", "limit": 20}))["recall"]
    assert [h["memory"]["content"] for h in hits] == ["Deploys make me nervous."]
    context = (await full.ok(CONTEXT, {"query": "deploys"}))["memoryContext"]
    assert "Fridays" not in context["text"] and context["count"] == 1
    assert (await full.ok(GET, {"id": shared_id}))["memory"] is None
    assert await full.error(LIST, {"scope": "PROJECT"}) == "FORBIDDEN"
    assert await full.error(RECALL, {"query": "deploy", "scope": "PROJECT"}) == "FORBIDDEN"
    assert (
        await full.error(SAVE, {"input": {"content": "x", "kind": "TOPICAL", "scope": "PROJECT"}})
        == "FORBIDDEN"
    )


async def test_the_default_policy_gives_clients_read_only_project_scope(
    http, database_url, embedder
):
    from memql.model import Consumer

    tenant = await make_tenant(database_url, Consumer.CLIENT)
    client = GraphQLClient(http, tenant.key, "alice")
    viewer = (await client.ok(VIEWER))["viewer"]
    assert viewer == {
        "userId": "alice",
        "consumer": "CLIENT",
        "grant": {"user": "READ_WRITE", "project": "READ"},
    }
    assert (
        await client.error(SAVE, {"input": {"content": "x", "kind": "TOPICAL", "scope": "PROJECT"}})
        == "FORBIDDEN"
    )
    saved = await client.ok(SAVE, {"input": {"content": "Mine.", "kind": "TOPICAL"}})
    assert saved["saveMemory"]["outcome"] == "CREATED"


async def test_erasure_needs_a_server_credential(http, jwt_tenant):
    tenant, secret = jwt_tenant
    token = make_token(secret, tenant, sub="alice")
    browser = GraphQLClient(http, None, None)
    browser.key = token
    saved = await browser.ok(SAVE, {"input": {"content": "Browser memory.", "kind": "TOPICAL"}})
    memory_id = saved["saveMemory"]["memory"]["id"]
    assert await browser.error(ERASE, {"id": memory_id}) == "FORBIDDEN"
    assert await browser.error(ERASE_USER) == "FORBIDDEN"
    assert contents(await browser.ok(LIST)) == ["Browser memory."]


# --- browser tokens -----------------------------------------------------------------------


def make_token(secret: str, tenant: Tenant, **overrides) -> str:
    claims = {
        "iss": f"https://{tenant.project_name}.example",
        "aud": "memql",
        "sub": "alice",
        "exp": int(time.time()) + 600,
        **overrides,
    }
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, secret, algorithm="HS256")


async def test_a_browser_token_acts_for_its_subject_as_a_client(http, jwt_tenant):
    tenant, secret = jwt_tenant
    client = GraphQLClient(http, make_token(secret, tenant, sub="carol"), None)
    viewer = (await client.ok(VIEWER))["viewer"]
    assert viewer == {
        "userId": "carol",
        "consumer": "CLIENT",
        "grant": {"user": "READ_WRITE", "project": "READ"},
    }
    await client.ok(SAVE, {"input": {"content": "Carol likes figs.", "kind": "TOPICAL"}})
    # the same user through the backend's API key sees the same memory
    assert contents(await GraphQLClient(http, tenant.key, "carol").ok(LIST)) == [
        "Carol likes figs."
    ]


async def test_websocket_credentials_travel_in_connection_init(server, tenant):
    url = server.replace("http://", "ws://") + "/graphql"
    for payload in (
        {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice"},
        {"headers": {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice"}},
    ):
        async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
            await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
            assert json.loads(await ws.recv())["type"] == "connection_ack"
            await ws.send(
                json.dumps(
                    {"id": "1", "type": "subscribe", "payload": {"query": "{ viewer { userId } }"}}
                )
            )
            message = json.loads(await ws.recv())
            assert message["payload"]["data"] == {"viewer": {"userId": "alice"}}

    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
        await ws.send(
            json.dumps(
                {
                    "type": "connection_init",
                    "payload": {"Authorization": "Bearer mq_wrong", "X-User-Id": "a"},
                }
            )
        )
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd.code == 4403


# --- row-level security -------------------------------------------------------------------


async def bind_bob(conn: psycopg.AsyncConnection, project_id: uuid.UUID) -> None:
    """The transaction as bob of the project, with the values the policies read set as memql
    sets them (`set_config`; on Citus `SET LOCAL`, which reaches the workers)."""
    if await is_distributed(conn):
        await conn.execute("set local citus.propagate_set_commands = 'local'")
        await conn.execute(f"set local memql.project_id = '{project_id}'")
        await conn.execute("set local memql.user_id = 'bob'")
        return
    await conn.execute(
        "select set_config('memql.project_id', %s, true), set_config('memql.user_id', 'bob', true)",
        (str(project_id),),
    )


async def test_row_level_security_hides_other_users_when_the_owner_filter_is_removed(
    alice, bob, tenant, database_url
):
    await alice.ok(SAVE, {"input": {"content": "Alice's diary entry.", "kind": "EPISODIC"}})
    await alice.ok(
        SAVE,
        {"input": {"content": "Team wiki lives in Notion.", "kind": "TOPICAL", "scope": "PROJECT"}},
    )
    await bob.ok(SAVE, {"input": {"content": "Bob's diary entry.", "kind": "EPISODIC"}})
    other = await make_tenant(database_url)
    await GraphQLClient(alice.http, other.key, "bob").ok(
        SAVE, {"input": {"content": "Bob elsewhere.", "kind": "TOPICAL"}}
    )

    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute(f"set role {APP_ROLE}")
        await conn.commit()
        await bind_bob(conn, tenant.project_id)
        # a query with every filter forgotten: only bob's rows and the project's shared rows
        cur = await conn.execute("select content from memories order by content")
        assert [r[0] for r in await cur.fetchall()] == [
            "Bob's diary entry.",
            "Team wiki lives in Notion.",
        ]
        cur = await conn.execute("select count(*) from memory_events where owner_id = 'alice'")
        assert await cur.fetchone() == (0,)
        await conn.rollback()

        # no principal bound: nothing at all
        cur = await conn.execute("select count(*) from memories")
        assert await cur.fetchone() == (0,)
        # and a row for another user cannot be written
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await bind_bob(conn, tenant.project_id)
            await conn.execute(
                "insert into memory_events (cursor, project_id, scope, owner_id, type, actor_id)"
                " values (1, %s, 'user', 'alice', 'memory.created', 'bob')",
                (tenant.project_id,),
            )


async def test_production_settings_hide_graphiql_introspection_and_suggestions(
    database_url, embedder, tenant
):
    settings = Settings(database_url=database_url, graphiql=False, introspection=False)
    async with (
        serving(settings, embedder) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        page = await http.get("/graphql", headers={"Accept": "text/html"})
        assert page.status_code == 404
        client = GraphQLClient(http, tenant.key, "alice")
        assert await client.error("{ __schema { queryType { name } } }") == "BAD_USER_INPUT"
        body = await client.raw("{ memories { edgez { cursor } } }")
        assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        assert "Did you mean" not in body["errors"][0]["message"]
        assert (await client.ok("{ viewer { userId } }"))["viewer"] == {"userId": "alice"}


async def test_a_grant_withdrawn_by_the_policy_ends_a_live_stream_within_five_seconds(
    policy_server, tenant
):
    import asyncio

    from tests import policies
    from tests.ws import EventSubscription, StreamEnded

    user = "streamer-" + tenant.project_name
    async with (
        httpx.AsyncClient(base_url=policy_server, timeout=60) as http,
        EventSubscription(policy_server, tenant.key, user) as sub,
    ):
        writer = GraphQLClient(http, tenant.key, user)
        await writer.ok(SAVE, {"input": {"content": "Streams are fun.", "kind": "TOPICAL"}})
        assert (await sub.next())["type"] == "memory.created"
        policies.WITHDRAWN.add(user)
        started = asyncio.get_running_loop().time()
        try:
            with pytest.raises(StreamEnded) as ended:
                await sub.next(wait=6)
        finally:
            policies.WITHDRAWN.discard(user)
        assert ended.value.code == "FORBIDDEN"
        assert asyncio.get_running_loop().time() - started < 5


async def test_credentials_that_cannot_be_resolved_fail_closed_with_503(
    database_url, embedder, tenant
):
    """The database goes away behind a real TCP proxy: requests are refused, not let through."""
    from tests.proxy import Proxy

    proxy = Proxy(database_url)
    url = await proxy.start()
    try:
        settings = Settings(database_url=url, pool_min_size=1, pool_max_size=2)
        async with (
            serving(settings, embedder) as server,
            httpx.AsyncClient(base_url=server, timeout=60) as http,
        ):
            client = GraphQLClient(http, tenant.key, "alice")
            assert (await client.ok(VIEWER))["viewer"]["userId"] == "alice"
            await proxy.stop()
            response = await http.post("/graphql", json={"query": VIEWER}, headers=client.headers())
            assert response.status_code == 503
            assert response.json()["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"
            assert "memor" not in response.text.lower()
    finally:
        await proxy.stop()
