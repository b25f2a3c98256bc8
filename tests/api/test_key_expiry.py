"""An API key past its expiry is refused exactly as a revoked key is, on every transport (HTTP,
both websocket protocols, multipart HTTP subscriptions, MCP), including where an instance had
kept the key's answer and where a principal was resolved before the expiry; and a stream open
across its key's expiry ends at the expiry, with nothing committed after it delivered.

The server here re-checks streams only once a minute, so what ends a stream is its key's
expiry, not the periodic pass."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
import websockets

from memql.access.credentials import display_prefix, generate_key, hash_key
from memql.db import tenants
from memql.db.pool import owner_connection
from memql.model import Consumer
from memql.settings import Settings
from memql.testing import GraphQLClient, Tenant, serving
from memql.testing.database import draw_event, log_event
from tests.api.test_realtime_edges import MULTIPART, TRANSPORTS, MultipartStream, Stream
from tests.operations import LIST, SAVE
from tests.ws import MEMORY_EVENTS, WsSession

VIEWER = "{ viewer { userId } }"
NEW = {"content": "Prefers tea over coffee", "kind": "TOPICAL"}
# how long a key made to expire during a test lives: long enough to set a stream up on a busy
# machine, short enough to keep the tests quick
LIFETIME = 2.5


@pytest.fixture(scope="module")
async def slow_recheck_server(database_url, embedder) -> AsyncIterator[str]:
    async with serving(Settings(database_url=database_url, auth_recheck_seconds=60), embedder) as u:
        yield u


async def new_key(
    database_url: str, tenant: Tenant, expires: timedelta | None = None, *, revoked: bool = False
) -> tuple[str, datetime | None]:
    """Another agent key of `tenant`'s project, expiring `expires` from the database's now
    (negative: already expired), or revoked; the key and its expiry."""
    key = generate_key()
    async with await owner_connection(database_url, autocommit=True) as conn:
        record = await tenants.insert_api_key(
            conn, tenant.project_id, display_prefix(key), hash_key(key), Consumer.AGENT,
            name="expiry test", expires=expires,
        )  # fmt: skip
        if revoked:
            assert await tenants.revoke_api_key(conn, record.id)
    return key, record.expires_at


async def expiring(database_url: str, tenant: Tenant, seconds: float) -> tuple[Tenant, float]:
    """`tenant` with a key of its project that expires in `seconds`; the expiry (time.time)."""
    key, expires_at = await new_key(database_url, tenant, timedelta(seconds=seconds))
    assert expires_at is not None
    return Tenant(tenant.project_id, tenant.project_name, key), expires_at.timestamp()


async def until(instant: float) -> None:
    await asyncio.sleep(max(0.0, instant - time.time()) + 0.05)


async def graphql(http: httpx.AsyncClient, key: str, query: str = VIEWER) -> tuple[int, Any]:
    response = await http.post(
        "/graphql",
        json={"query": query},
        headers={"Authorization": f"Bearer {key}", "X-User-Id": "alice"},
    )
    return response.status_code, response.json()


async def test_an_expired_key_gets_a_revoked_keys_answer_over_http(http, database_url, tenant, db):
    expired, _ = await new_key(database_url, tenant, timedelta(seconds=-1))
    revoked, _ = await new_key(database_url, tenant, revoked=True)
    for query in (VIEWER, LIST):
        status, body = await graphql(http, expired, query)
        assert (status, body) == await graphql(http, revoked, query)
        assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
        assert body["errors"][0]["message"] == tenants.KEY_REFUSED
    assert await GraphQLClient(http, expired, "alice").error(SAVE, {"input": NEW}) == (
        "UNAUTHENTICATED"
    )
    cur = await db.execute(
        "select count(*) from memories where project_id = %s", (tenant.project_id,)
    )
    assert (await cur.fetchone())[0] == 0


async def test_a_key_in_use_is_refused_from_its_expiry_on_though_the_instance_kept_it(
    http, database_url, tenant, db
):
    """The instance resolved and kept the key; its expiry changes nothing in the database,
    and the kept answer is not served past it."""
    live, expires = await expiring(database_url, tenant, LIFETIME)
    alice = GraphQLClient(http, live.key, "alice")
    await alice.ok(VIEWER)
    await alice.ok(LIST)
    assert time.time() < expires, "the set-up outlived the key: raise LIFETIME"
    await until(expires)
    assert await alice.error(VIEWER) == "UNAUTHENTICATED"
    assert await alice.error(LIST) == "UNAUTHENTICATED"
    assert await alice.error(SAVE, {"input": NEW}) == "UNAUTHENTICATED"
    cur = await db.execute(
        "select count(*) from memories where project_id = %s", (tenant.project_id,)
    )
    assert (await cur.fetchone())[0] == 0


async def test_a_transaction_of_a_principal_whose_key_has_expired_runs_nothing(
    database_url, tenant, db
):
    """A principal resolved before the expiry and used after it: the statement that binds every
    transaction refuses it (what a request in flight across the expiry meets)."""
    expired, _ = await new_key(database_url, tenant, timedelta(seconds=-1))
    cur = await db.execute("select id from api_keys where key_hash = %s", (hash_key(expired),))
    (key_id,) = await cur.fetchone()
    with pytest.raises(psycopg.errors.InvalidAuthorizationSpecification) as refused:
        await db.execute("select memql_credential_holds(%s, %s)", (tenant.project_id, key_id))
    assert "expired" in str(refused.value)
    cur = await db.execute(
        "select memql_credential_holds(%s, k.id) from api_keys k where k.key_hash = %s",
        (tenant.project_id, hash_key(tenant.key)),
    )
    assert (await cur.fetchone())[0] is True


MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


async def mcp(http: httpx.AsyncClient, key: str, body: dict[str, Any]) -> tuple[int, Any]:
    response = await http.post(
        "/mcp",
        json=body,
        headers={
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {key}",
            "X-User-Id": "alice",
        },
    )
    return response.status_code, response.json()


async def test_an_expired_key_gets_a_revoked_keys_answer_over_mcp(http, database_url, tenant):
    expired, _ = await new_key(database_url, tenant, timedelta(seconds=-1))
    revoked, _ = await new_key(database_url, tenant, revoked=True)
    tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    for body in (MCP_INITIALIZE, tools):
        status, answer = await mcp(http, expired, body)
        assert (status, answer) == await mcp(http, revoked, body)
        assert status == 401
        assert answer["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert (await mcp(http, tenant.key, MCP_INITIALIZE))[0] == 200


async def connection_refusal(server: str, key: str, protocol: str) -> tuple[list[Any], int, str]:
    """What a websocket whose `connection_init` carries `key` receives before it is closed,
    and how it is closed."""
    url = server.replace("http://", "ws://") + "/graphql"
    received: list[Any] = []
    async with websockets.connect(url, subprotocols=[websockets.Subprotocol(protocol)]) as ws:
        init = {"Authorization": f"Bearer {key}", "X-User-Id": "alice"}
        await ws.send(json.dumps({"type": "connection_init", "payload": init}))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            async with asyncio.timeout(10):
                while True:
                    received.append(json.loads(await ws.recv()))
    assert closed.value.rcvd is not None, received
    return received, closed.value.rcvd.code, closed.value.rcvd.reason


@pytest.mark.parametrize("protocol", ["graphql-transport-ws", "graphql-ws"])
async def test_an_expired_key_is_refused_at_connection_init_as_a_revoked_one(
    server, database_url, tenant, protocol
):
    expired, _ = await new_key(database_url, tenant, timedelta(seconds=-1))
    revoked, _ = await new_key(database_url, tenant, revoked=True)
    refusal = await connection_refusal(server, expired, protocol)
    assert refusal == await connection_refusal(server, revoked, protocol)
    if protocol == "graphql-transport-ws":
        assert refusal[1] == 4403


@pytest.mark.parametrize("protocol", ["graphql-transport-ws", "graphql-ws"])
async def test_an_open_socket_runs_no_new_operation_once_its_key_has_expired(
    slow_recheck_server, database_url, tenant, protocol
):
    live, expires = await expiring(database_url, tenant, LIFETIME)
    init = {"Authorization": f"Bearer {live.key}", "X-User-Id": "alice"}
    async with WsSession(slow_recheck_server, init, protocol) as ws:
        if not ws.legacy:
            assert (await ws.run(VIEWER))["data"]["viewer"]["userId"] == "alice"
        assert time.time() < expires, "the set-up outlived the key: raise LIFETIME"
        await until(expires)
        if not ws.legacy:
            refused = await ws.run(SAVE, {"input": NEW})
            assert refused["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
            assert refused["errors"][0]["message"] == tenants.KEY_REFUSED
        subscribed = await ws.result(await ws.start(MEMORY_EVENTS, {"since": "0"}))
        assert not (subscribed.get("data") or {}).get("memoryEvents"), subscribed
        assert subscribed["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_a_multipart_subscription_with_an_expired_key_is_refused_as_with_a_revoked_one(
    http, database_url, tenant
):
    expired, _ = await new_key(database_url, tenant, timedelta(seconds=-1))
    revoked, _ = await new_key(database_url, tenant, revoked=True)

    async def subscribe(key: str) -> list[dict[str, Any]]:
        headers = {"Authorization": f"Bearer {key}", "X-User-Id": "alice", "Accept": MULTIPART}
        body = {"query": MEMORY_EVENTS, "variables": {"since": "0"}}
        payloads = []
        async with http.stream("POST", "/graphql", json=body, headers=headers) as response:
            assert response.status_code == 200
            stream = MultipartStream(response)
            with contextlib.suppress(StopAsyncIteration):
                while True:
                    payloads.append(await asyncio.wait_for(stream.next(), 10))
        return payloads

    refused = await subscribe(expired)
    assert refused == await subscribe(revoked)
    assert refused == [
        {
            "data": None,
            "errors": [{"message": tenants.KEY_REFUSED, "extensions": {"code": "UNAUTHENTICATED"}}],
        }
    ]


# --- a stream open across its key's expiry ----------------------------------------------------


async def log_events_until(database_url: str, project_id: uuid.UUID, stop: float) -> list[tuple]:
    """Project events written one after another until `stop` (time.time) has passed and one
    more has committed; each event's cursor and the time.time() before its COMMIT was sent
    (an event whose COMMIT was sent after an instant committed after it)."""
    written: list[tuple[int, float]] = []
    async with await owner_connection(database_url) as conn:
        while not written or written[-1][1] < stop:
            cursor = await draw_event(conn, project_id)
            sent = time.time()
            await conn.commit()
            written.append((cursor, sent))
            await asyncio.sleep(0.02)
    return written


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_stream_open_across_its_keys_expiry_gets_nothing_committed_after_it(
    slow_recheck_server, database_url, tenant, transport
):
    """Events commit every ~20 ms from before the expiry to after it: the stream delivers
    those it can until the expiry, none whose COMMIT was sent after it, and ends with a
    revoked key's error."""
    live, expires = await expiring(database_url, tenant, LIFETIME)
    async with asyncio.timeout(30), Stream(slow_recheck_server, live, transport) as stream:
        first, _ = await log_event(database_url, live.project_id)
        assert (await stream.next())["data"]["memoryEvents"]["cursor"] == str(first)
        assert time.time() < expires - 0.5, "the set-up outlived the key: raise LIFETIME"
        writing = asyncio.create_task(log_events_until(database_url, live.project_id, expires))
        delivered: list[int] = []
        while True:
            result = await stream.next()
            event = (result.get("data") or {}).get("memoryEvents")
            if event is None:
                break
            delivered.append(int(event["cursor"]))
        ended_at = time.time()
        written = await writing

    after_expiry = {cursor for cursor, sent in written if sent >= expires}
    assert after_expiry, "no event was written after the expiry"
    assert delivered, "no event was delivered before the expiry"
    assert not set(delivered) & after_expiry, f"committed after the expiry: {delivered}"
    assert result["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED", result
    assert result["errors"][0]["message"] == tenants.KEY_REFUSED
    assert ended_at - expires < 2, "the stream outlived its key's expiry"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_idle_stream_ends_at_its_keys_expiry(
    slow_recheck_server, database_url, tenant, transport
):
    """No event need follow the expiry, and no pass is due: the stream ends at it."""
    live, expires = await expiring(database_url, tenant, LIFETIME)
    async with asyncio.timeout(30), Stream(slow_recheck_server, live, transport) as stream:
        cursor, _ = await log_event(database_url, live.project_id)
        assert (await stream.next())["data"]["memoryEvents"]["cursor"] == str(cursor)
        ended = await stream.next(wait=LIFETIME + 10)
        ended_at = time.time()
        assert ended["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED", ended
        assert await stream.next() == {}, "the stream went on after its key expired"
    assert expires <= ended_at < expires + 1.5, ended_at - expires
