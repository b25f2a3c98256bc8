"""The GraphQL HTTP edge under attack: a document is bounded in bytes before it is parsed; a
batched POST is one request, sharing one write, alias and field budget and one deadline;
malformed batch entries and a persisted subscription are clear 400s, never a 500; persisted
queries belong to the project that registered them."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
import websockets

from memql.settings import Settings
from memql.testing import Tenant, make_tenant, serving

TYPENAME = "{ __typename }"


def sha(query: str) -> str:
    return hashlib.sha256(query.encode()).hexdigest()


def apq(query: str) -> dict[str, Any]:
    return {"persistedQuery": {"version": 1, "sha256Hash": sha(query)}}


def creds(tenant: Tenant, user: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.key}", "X-User-Id": user}


def codes(answers: list[dict[str, Any]]) -> list[str]:
    return [a["errors"][0]["extensions"]["code"] for a in answers]


@pytest.fixture(scope="module")
async def batching(database_url, embedder) -> AsyncIterator[str]:
    async with serving(Settings(database_url=database_url, batch_max=20), embedder) as url:
        yield url


@pytest.fixture
async def client(batching) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=batching, timeout=30) as http:
        yield http


async def stored(database_url: str, tenant: Tenant) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "select count(*) from memories where project_id = %s", (tenant.project_id,)
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


# --- documents bounded before parsing -------------------------------------------------------


@pytest.mark.parametrize("with_credentials", [False, True])
async def test_a_short_query_padded_with_comments_is_refused_by_its_size(
    client, tenant, with_credentials
):
    # a few tokens and 100 KB of distinct comment lines: the token limit does not weigh them
    padded = TYPENAME + "\n" + "".join(f"# {n:06d} {'x' * 90}\n" for n in range(1000))
    headers = creds(tenant) if with_credentials else {}
    response = await client.post("/graphql", json={"query": padded}, headers=headers)
    assert response.status_code == 200, response.text
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT", error
    assert "MEMQL_MAX_DOCUMENT_BYTES" in error["message"]
    # the same document within the bound runs
    fine = await client.post("/graphql", json={"query": TYPENAME + "\n# short"}, headers=headers)
    assert fine.json() == {"data": {"__typename": "Query"}}


async def test_a_large_body_without_credentials_is_refused_by_its_length(client, tenant):
    # twice MEMQL_MAX_DOCUMENT_BYTES (the test server's default, 64 KiB) without credentials;
    # the same body with a key reaches the document's own bound
    padded = TYPENAME + "\n" + "".join(f"# {n:06d} {'x' * 90}\n" for n in range(2000))
    anonymous = await client.post("/graphql", json={"query": padded})
    assert anonymous.status_code == 413, anonymous.text
    error = anonymous.json()["errors"][0]
    assert "without credentials" in error["message"], error
    assert "131072" in error["message"], error
    keyed = await client.post("/graphql", json={"query": padded}, headers=creds(tenant))
    assert keyed.status_code == 200, keyed.text
    assert "MEMQL_MAX_DOCUMENT_BYTES" in keyed.json()["errors"][0]["message"]
    # a small request without credentials is answered as before
    fine = await client.post("/graphql", json={"query": TYPENAME})
    assert fine.json() == {"data": {"__typename": "Query"}}


async def test_a_websockets_first_message_is_held_to_the_bound_of_a_request_without_credentials(
    batching, tenant
):
    """`connection_init` comes before any credential is checked: it may hold what a request
    without credentials may (twice MEMQL_MAX_DOCUMENT_BYTES); after it, a message may hold up
    to MEMQL_MAX_BODY_BYTES."""
    url = batching.replace("http://", "ws://") + "/graphql"
    padding = "x" * 140_000
    payload = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice", "pad": padding}
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1009
    assert "131072" in closed.value.rcvd.reason
    # the same padding after a small connection_init is a message like any other
    del payload["pad"]
    padded = TYPENAME + "\n#" + padding
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": padded}}))
        answer = json.loads(await ws.recv())
        # refused by the document's own bound, as over HTTP with a key
        assert "MEMQL_MAX_DOCUMENT_BYTES" in json.dumps(answer), answer
        await ws.send(json.dumps({"id": "2", "type": "subscribe", "payload": {"query": TYPENAME}}))
        answer = json.loads(await ws.recv())
        assert answer == {"id": "2", "type": "next", "payload": {"data": {"__typename": "Query"}}}


# --- a batch is one request -------------------------------------------------------------------

SAVE_MANY = "mutation($i: [SaveMemoryInput!]!) { saveMemories(inputs: $i) { outcome } }"


def inputs(count: int, tag: str) -> list[dict[str, Any]]:
    return [{"content": f"{tag} memory {n}.", "kind": "TOPICAL"} for n in range(count)]


async def test_a_batch_shares_one_write_budget(client, tenant, database_url):
    batch = [{"query": SAVE_MANY, "variables": {"i": inputs(60, f"part {n}")}} for n in range(2)]
    response = await client.post("/graphql", json=batch, headers=creds(tenant))
    assert response.status_code == 200, response.text
    answers = response.json()
    assert codes(answers) == ["BAD_USER_INPUT"] * 2, answers
    assert "this batch would write 120" in answers[0]["errors"][0]["message"]
    assert await stored(database_url, tenant) == 0
    # within the budget together, both run
    batch = [{"query": SAVE_MANY, "variables": {"i": inputs(50, f"half {n}")}} for n in range(2)]
    answers = (await client.post("/graphql", json=batch, headers=creds(tenant))).json()
    assert [len(a["data"]["saveMemories"]) for a in answers] == [50, 50]


def aliased_counts(count: int) -> str:
    fields = " ".join(f"c{n}: memories(first: 200) {{ totalCount }}" for n in range(count))
    return f"{{ {fields} }}"


async def test_a_batch_shares_one_alias_budget(client, tenant):
    batch = [{"query": aliased_counts(20)}] * 2  # 20 each, within the limit of one (30)
    answers = (await client.post("/graphql", json=batch, headers=creds(tenant))).json()
    assert codes(answers) == ["BAD_USER_INPUT"] * 2, answers
    assert "at most 30 aliases" in answers[0]["errors"][0]["message"]
    single = (
        await client.post("/graphql", json=[{"query": aliased_counts(20)}], headers=creds(tenant))
    ).json()
    assert single[0]["data"]["c19"] == {"totalCount": 0}


async def test_a_batch_shares_one_field_budget(client, tenant):
    # three fields, each one call of the service: 14 operations ask for 42
    many = '{ viewer { userId } memories(first: 1) { totalCount } recall(query: "x") { score } }'
    answers = (
        await client.post("/graphql", json=[{"query": many}] * 14, headers=creds(tenant))
    ).json()
    assert codes(answers) == ["BAD_USER_INPUT"] * 14, answers[0]
    assert "at most 40 top-level fields" in answers[0]["errors"][0]["message"]


# --- 500s that were -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        [5],
        [{"query": 5}],
        [1, "x", None],
        [{"query": TYPENAME, "variables": []}],
        [{"query": TYPENAME, "extensions": "yes"}],
        [{"query": TYPENAME, "operationName": 5}],
        {"query": TYPENAME, "operationName": 5},
        {"query": TYPENAME, "operationName": ["a"]},
        {"query": TYPENAME, "operationName": "\ud800"},
        {
            "extensions": {"persistedQuery": {"version": 1, "sha256Hash": "0" * 64}},
            "operationName": "\ud800",
        },
        [{"query": TYPENAME, "operationName": "a b"}],
    ],
    ids=repr,
)
@pytest.mark.parametrize("with_credentials", [False, True])
async def test_a_malformed_operation_is_a_json_400(client, tenant, body, with_credentials):
    headers = {**(creds(tenant) if with_credentials else {}), "Content-Type": "application/json"}
    # json.dumps escapes a lone surrogate as JSON allows (\ud800)
    response = await client.post("/graphql", content=json.dumps(body).encode(), headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


async def test_a_learned_document_run_by_hash_as_its_subscription_is_a_400(client, tenant):
    document = "query Q { viewer { userId } } subscription S { memoryEvents { cursor } }"
    learn = await client.post(
        "/graphql",
        json={"query": document, "operationName": "Q", "extensions": apq(document)},
        headers=creds(tenant),
    )
    assert learn.json() == {"data": {"viewer": {"userId": "alice"}}}
    for body in (
        {"operationName": "S", "extensions": apq(document)},
        [{"operationName": "S", "extensions": apq(document)}],
    ):
        response = await client.post("/graphql", json=body, headers=creds(tenant))
        assert response.status_code in (200, 400), response.text
        answer = response.json()
        answer = answer[0] if isinstance(answer, list) else answer
        assert answer["errors"][0]["extensions"]["code"] == "BAD_REQUEST", answer


# --- persisted queries belong to a project ------------------------------------------------------


async def test_a_hash_finds_only_its_own_projects_queries(client, tenant, database_url):
    other = await make_tenant(database_url)
    query = f"query Secret {{ viewer {{ userId }} }} # {tenant.project_id}"
    learned = await client.post(
        "/graphql", json={"query": query, "extensions": apq(query)}, headers=creds(tenant)
    )
    assert learned.json()["data"]["viewer"]["userId"] == "alice"
    mine = await client.post("/graphql", json={"extensions": apq(query)}, headers=creds(tenant))
    assert mine.json()["data"]["viewer"]["userId"] == "alice"
    # another tenant, and a caller without credentials, learn nothing from the hash
    for headers in (creds(other), {}):
        theirs = await client.post("/graphql", json={"extensions": apq(query)}, headers=headers)
        assert theirs.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"


async def test_only_a_request_with_credentials_registers_a_persisted_query(client, tenant):
    query = f"query Anonymous {{ __typename }} # {tenant.project_id}"
    anonymous = await client.post("/graphql", json={"query": query, "extensions": apq(query)})
    assert anonymous.json() == {"data": {"__typename": "Query"}}
    after = await client.post("/graphql", json={"extensions": apq(query)}, headers=creds(tenant))
    assert after.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"


# --- one deadline -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def hurried(database_url, embedder) -> AsyncIterator[str]:
    settings = Settings(database_url=database_url, batch_max=5, request_timeout_seconds=1.0)
    async with serving(settings, embedder) as url:
        yield url


LIST = "{ memories(first: 5) { edges { node { id } } } }"


async def answers_in_time(http: httpx.AsyncClient, tenant: Tenant) -> bool:
    """The list answers within the deadline (on a loaded machine, within a few tries)."""
    for _ in range(10):
        answer = (await http.post("/graphql", json=[{"query": LIST}], headers=creds(tenant))).json()
        if answer[0].get("data"):
            return bool(answer[0]["data"]["memories"]["edges"] == [])
    return False


async def locked_where_reads_go(database_url: str, read_database_url: str) -> bool:
    """Whether reads of memories at `read_database_url` wait for an exclusive lock: at once on
    the primary; on a standby once it has replayed the lock, which a commit beside it sends
    (WAL is flushed at a commit)."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("select pg_current_xact_id()")
    async with await psycopg.AsyncConnection.connect(read_database_url, autocommit=True) as conn:
        for _ in range(100):
            cur = await conn.execute(
                "select count(*) from pg_locks where locktype = 'relation'"
                " and relation = 'memories'::regclass and mode = 'AccessExclusiveLock'"
                " and granted"
            )
            if (await cur.fetchone() or (0,))[0]:
                return True
            await asyncio.sleep(0.05)
    return False


async def test_a_batch_shares_one_deadline(hurried, tenant, database_url, read_database_url):
    async with (
        httpx.AsyncClient(base_url=hurried, timeout=30) as http,
        await psycopg.AsyncConnection.connect(database_url) as locker,
    ):
        assert await answers_in_time(http, tenant)
        # every read of memories waits while this transaction holds its lock
        await locker.execute("lock table memories in access exclusive mode")
        assert await locked_where_reads_go(database_url, read_database_url)

        async def release() -> None:  # bounds the test when the deadline does not hold
            await asyncio.sleep(5)
            await locker.rollback()

        releasing = asyncio.create_task(release())
        started = time.monotonic()
        response = await http.post("/graphql", json=[{"query": LIST}] * 5, headers=creds(tenant))
        elapsed = time.monotonic() - started
        answers = response.json()
        # the first is cut at the deadline; the others never start
        assert codes(answers) == ["REQUEST_TIMEOUT"] * 5, answers
        assert elapsed < 3.0, elapsed
        await releasing
        # and the server answers again
        assert await answers_in_time(http, tenant)
