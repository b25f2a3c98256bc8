"""What a request costs, and what one project may have running at once.

A request's cost is the event-loop work its fields ask for, counted from the document before
anything runs (`graphql/budgets.py`). Over `MEMQL_MAX_REQUEST_COST`, over HTTP, websockets or
as a batch together, it is BAD_USER_INPUT and nothing runs; the Python client's heaviest
operations stay far within the default. Below it, one project's requests running at once on
an instance cost at most `MEMQL_PROJECT_COST_AT_ONCE` together: the next waits for its turn
(at most `MEMQL_POOL_TIMEOUT_SECONDS`, then 429 TOO_MANY_REQUESTS with nothing run), while
another project's request does not wait at all."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from graphql import get_named_type, get_nullable_type, is_composite_type, is_list_type, parse

from memql import runtime
from memql.client import operations
from memql.db.pool import owner_connection
from memql.errors import RateLimited
from memql.graphql.budgets import LISTS, CostShares, cost
from memql.graphql.schema import schema
from memql.settings import Settings
from memql.testing import Tenant, fresh_database, make_tenant, serving
from tests.ws import WsSession

TYPES = schema._schema
MAX_COST = 5000
VIEWER = "{ viewer { userId } }"
SAVE_MANY = "mutation($i: [SaveMemoryInput!]!) { saveMemories(inputs: $i) { outcome memory { id content } } }"  # noqa: E501


def creds(tenant: Tenant, user: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.key}", "X-User-Id": user}


def inputs(count: int, tag: str) -> list[dict[str, Any]]:
    return [{"content": f"{tag} memory {n}.", "kind": "TOPICAL"} for n in range(count)]


def pages(count: int, size: int = 200) -> str:
    fields = " ".join(
        f"p{n}: memories(first: {size}) {{ edges {{ node {{ id }} }} }}" for n in range(count)
    )
    return f"{{ {fields} }}"


def points(query: str, variables: dict[str, Any] | None = None) -> int:
    return cost(TYPES, parse(query), None, variables)


async def stored(database_url: str, tenant: Tenant) -> int:
    async with await owner_connection(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "select count(*) from memories where project_id = %s", (tenant.project_id,)
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


# --- the cost of a document -------------------------------------------------------------------


def test_every_list_of_objects_in_the_schema_has_a_size_in_the_cost():
    lists = {
        (type_.name, name)
        for type_ in TYPES.type_map.values()
        if not type_.name.startswith("__") and hasattr(type_, "fields")
        for name, field in type_.fields.items()
        if is_list_type(get_nullable_type(field.type))
        and is_composite_type(get_named_type(field.type))
    }
    assert lists == LISTS


def test_a_cost_follows_what_the_document_asks_for():
    count = "{ memories(first: 200) { totalCount } }"
    page = "{ memories(first: 200) { edges { node { id } } } }"
    # a count reads no page; a page of 200 costs ten times one of 20
    assert points(count) < points(page) / 10
    small = points("{ memories(first: 20) { edges { node { id } } } }")
    assert (points(page) - points(VIEWER)) / (small - points(VIEWER)) > 5
    # aliases multiply; the same field selected twice (one response key) is resolved once
    assert points(pages(3)) - points(VIEWER) > 2.9 * (points(page) - points(VIEWER))
    twice = "{ memories(first: 200) { edges { node { id } } edges { node { id } } } }"
    assert points(twice) == points(page)
    # a variable costs what it says, or its declared default when it is not given
    sized = "query($n: Int = 200) { memories(first: $n) { edges { node { id } } } }"
    assert points(sized) == points(page)
    assert points(sized, {"n": 20}) == small
    # each memory a batch save writes counts, from a variable or a literal list
    assert points(SAVE_MANY, {"i": inputs(40, "x")}) > 3.9 * points(
        SAVE_MANY, {"i": inputs(10, "x")}
    )


def test_the_python_clients_heaviest_operations_fit_the_default_budget_with_room():
    budget = Settings().max_request_cost
    save_many = operations.save_many(
        [operations.MemoryInput(f"fact {n}", "TOPICAL") for n in range(100)]
    )
    page = operations.memories(first=200, total_count=True)
    default_page = operations.memories()
    recall = operations.recall("what", limit=20)
    assert points(save_many.document, save_many.variables) < 0.8 * budget
    assert points(page.document, page.variables) < 0.2 * budget
    assert points(recall.document, recall.variables) < 0.05 * budget
    # a batch of 20 default pages (what MEMQL_BATCH_MAX=20 lets a client send) fits too
    assert 20 * points(default_page.document, default_page.variables) < budget
    # and thirty aliased pages of 200 do not
    assert points(pages(30)) > 2 * budget


# --- a request over the budget ------------------------------------------------------------------


@pytest.fixture(scope="module")
async def budgeted(postgres: str, hash_embedder) -> AsyncIterator[str]:
    settings = Settings(database_url=postgres, batch_max=5, max_request_cost=MAX_COST)
    async with serving(settings, hash_embedder) as url:
        yield url


@pytest.fixture
async def client(budgeted: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=budgeted, timeout=30) as http:
        yield http


def over_budget(answer: dict[str, Any]) -> bool:
    errors = answer.get("errors") or []
    return (
        not answer.get("data")
        and len(errors) == 1
        and errors[0]["extensions"]["code"] == "BAD_USER_INPUT"
        and errors[0]["extensions"]["limit"] == MAX_COST
        and "MEMQL_MAX_REQUEST_COST" in errors[0]["message"]
    )


async def test_a_mutation_over_the_cost_budget_is_refused_and_writes_nothing(
    client: httpx.AsyncClient, tenant: Tenant, postgres: str
):
    many = {"query": SAVE_MANY, "variables": {"i": inputs(40, "over")}}
    assert points(many["query"], many["variables"]) > MAX_COST  # within the write budget (100)
    response = await client.post("/graphql", json=many, headers=creds(tenant))
    assert response.status_code == 200, response.text
    assert over_budget(response.json()), response.json()
    assert await stored(postgres, tenant) == 0
    # within the budget, the same mutation writes
    fewer = {"query": SAVE_MANY, "variables": {"i": inputs(20, "within")}}
    answer = (await client.post("/graphql", json=fewer, headers=creds(tenant))).json()
    assert [r["outcome"] for r in answer["data"]["saveMemories"]] == ["CREATED"] * 20, answer
    assert await stored(postgres, tenant) == 20


async def test_aliased_pages_over_the_cost_budget_are_refused_over_http_and_websockets(
    client: httpx.AsyncClient, budgeted: str, tenant: Tenant
):
    # two aliased pages of 200: within the alias and field budgets, over the cost
    assert points(pages(1)) < MAX_COST < points(pages(2))
    http = (await client.post("/graphql", json={"query": pages(2)}, headers=creds(tenant))).json()
    assert over_budget(http), http
    # graphql-transport-ws runs queries (the legacy protocol only subscriptions)
    async with WsSession(budgeted, creds(tenant), "graphql-transport-ws") as ws:
        assert over_budget(await ws.run(pages(2)))
        assert (await ws.run(pages(1)))["data"] == {"p0": {"edges": []}}


async def test_a_batch_shares_one_cost_budget(
    client: httpx.AsyncClient, tenant: Tenant, postgres: str
):
    half = {"query": SAVE_MANY, "variables": {"i": inputs(20, "half")}}
    assert (
        points(half["query"], half["variables"])
        < MAX_COST
        < 2 * points(half["query"], half["variables"])
    )
    answers = (await client.post("/graphql", json=[half, half], headers=creds(tenant))).json()
    assert all(over_budget(a) for a in answers), answers
    assert "this batch would cost" in answers[0]["errors"][0]["message"]
    assert await stored(postgres, tenant) == 0


def fragment_bomb(width: int) -> str:
    """A few KB whose fragments, spread into each other, expand to `width` ** 3 fields."""
    edge = " ".join(f"n{i}: node {{ id }}" for i in range(width))
    page = " ".join(f"e{i}: edges {{ ...Edge }}" for i in range(width))
    root = " ".join(f"m{i}: memories(first: 1) {{ ...Page }}" for i in range(width))
    return (
        f"{{ {root} }} fragment Page on MemoryConnection {{ {page} }}"
        f" fragment Edge on MemoryEdge {{ {edge} }}"
    )


async def test_a_batch_of_fragment_bombs_is_refused_by_its_cost_counted_no_further_than_it(
    client: httpx.AsyncClient, tenant: Tenant
):
    bomb = fragment_bomb(60)  # 216,000 fields in 4 KB
    assert points(bomb) > 100 * MAX_COST
    assert MAX_COST < cost(TYPES, parse(bomb), None, None, ceiling=MAX_COST) < 2 * MAX_COST
    # within the shape bounds (2,000 fields expanded), a batch of them is over the cost
    within = fragment_bomb(9)  # 1,548 fields
    batch = [{"query": within}] * 5
    answers = (await client.post("/graphql", json=batch, headers=creds(tenant))).json()
    assert all(over_budget(a) for a in answers), answers[0]
    assert "this batch would cost" in answers[0]["errors"][0]["message"]
    # the larger bomb is refused by its shape before its cost is counted
    [answer] = (await client.post("/graphql", json=[{"query": bomb}], headers=creds(tenant))).json()
    assert answer["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "limit": 2000}, answer


# --- one project's share ------------------------------------------------------------------------


async def test_shares_hold_points_in_turn_and_a_request_larger_than_the_share_runs_alone():
    shares, project, other = CostShares(1000, wait=0.2), uuid.uuid4(), uuid.uuid4()
    assert await shares.acquire(project, 600) == 600
    assert await shares.acquire(project, 400) == 400  # 1000 together: both run
    third = asyncio.create_task(shares.acquire(project, 1))
    small = asyncio.create_task(shares.acquire(project, 1))
    await asyncio.sleep(0.01)
    assert not third.done() and not small.done()  # first come, first served
    assert await shares.acquire(other, 1000) == 1000  # another project's share is its own
    shares.release(project, 600)
    assert await third == 1 and await small == 1
    # larger than the share: it waits until nothing else of the project runs, then runs alone
    alone = asyncio.create_task(shares.acquire(project, 5000))
    await asyncio.sleep(0.01)
    shares.release(project, 400)
    shares.release(project, 1)
    assert not alone.done()
    shares.release(project, 1)
    assert await alone == 1000
    # its turn not coming in time: TOO_MANY_REQUESTS, and the waiter leaves the queue
    with pytest.raises(RateLimited) as refused:
        await shares.acquire(project, 1)
    assert "MEMQL_PROJECT_COST_AT_ONCE" in refused.value.message
    assert shares.running(project) == (1000, 0)
    shares.release(project, 1000)
    assert shares.running(project) == (0, 0)


@pytest.fixture(scope="module")
async def shared(postgres: str, hash_embedder) -> AsyncIterator[tuple[str, str]]:
    """A database of its own (a test locks a table of it) and a server where each project
    runs one request at a time, waiting at most half a second for its turn."""
    async with fresh_database(postgres) as database_url:
        settings = Settings(
            database_url=database_url,
            batch_max=5,
            project_cost_at_once=1,
            pool_timeout_seconds=0.5,
            request_timeout_seconds=20,
        )
        async with serving(settings, hash_embedder) as url:
            yield database_url, url


def turn_refused(response: httpx.Response) -> bool:
    answers = response.json()
    answers = answers if isinstance(answers, list) else [answers]
    errors = [e for a in answers for e in a.get("errors") or []]
    return (
        response.status_code == 429
        and int(response.headers["Retry-After"]) >= 1
        and len(errors) == len(answers)
        and all(e["extensions"]["code"] == "TOO_MANY_REQUESTS" for e in errors)
        and "MEMQL_PROJECT_COST_AT_ONCE" in errors[0]["message"]
        and not any(a.get("data") for a in answers)
    )


async def waiting_for_the_lock(database_url: str, within: float = 10.0) -> None:
    """Until a read of memories (not the relay's of the event log) waits for the lock, where
    reads go: the database itself, or its standby with `--reads-on-standby` (which replays
    the lock once its WAL is flushed, as a commit beside it does)."""
    async with await owner_connection(database_url, autocommit=True) as conn:
        await conn.execute("select pg_current_xact_id()")
    reads = runtime.read_url(Settings(database_url=database_url), database_url) or database_url
    deadline = time.monotonic() + within
    async with await owner_connection(reads, autocommit=True) as conn:
        while time.monotonic() < deadline:
            cur = await conn.execute(
                "select count(*) from pg_stat_activity"
                " where datname = current_database() and wait_event_type = 'Lock'"
                " and query ilike '%from memories%' and query not ilike '%memory_events%'"
            )
            row = await cur.fetchone()
            if row and row[0]:
                return
            await asyncio.sleep(0.02)
    raise AssertionError("the first request never reached the database")


def cost_gauges(text: str) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r"^memql_cost_share_(\w+) (\S+)$", text, re.M)}


async def test_a_projects_requests_wait_for_their_turn_and_another_project_does_not(
    shared: tuple[str, str],
):
    database_url, url = shared
    mine, theirs = await make_tenant(database_url), await make_tenant(database_url)
    save = {"query": SAVE_MANY, "variables": {"i": inputs(1, "refused")}}
    page = {"query": "{ memories(first: 5) { edges { node { id } } } }"}
    async with (
        httpx.AsyncClient(base_url=url, timeout=30) as http,
        await owner_connection(database_url) as locker,
    ):
        async with locker.transaction():
            # the project's first request holds its turn while it waits for this lock
            await locker.execute("lock table memories in access exclusive mode")
            first = asyncio.create_task(http.post("/graphql", json=page, headers=creds(mine)))
            await waiting_for_the_lock(database_url)
            # another project is served at once
            other = await http.post("/graphql", json={"query": VIEWER}, headers=creds(theirs))
            assert other.json() == {"data": {"viewer": {"userId": "alice"}}}, other.text
            # the same project's next request, single or batched, waits and is refused
            single = await http.post("/graphql", json=save, headers=creds(mine))
            assert turn_refused(single), (single.status_code, single.text)
            batch = await http.post("/graphql", json=[save, page], headers=creds(mine))
            assert turn_refused(batch), (batch.status_code, batch.text)
            async with WsSession(url, creds(mine), "graphql-transport-ws") as ws:
                answer = await ws.run(VIEWER)
            assert answer["errors"][0]["extensions"]["code"] == "TOO_MANY_REQUESTS", answer
            assert not first.done()
            # /metrics shows the turn held and the refusals
            held = cost_gauges((await http.get("/metrics")).text)
            assert held["projects_running"] == 1 and held["points_running"] >= 1, held
            assert held["waiting"] == 0 and held["refused_total"] >= 3, held
        # the lock released, the first request ends with its answer
        assert (await first).json() == {"data": {"memories": {"edges": []}}}
        # nothing the refused requests asked for ran; the project's turn is free again
        assert await stored(database_url, mine) == 0
        again = (await http.post("/graphql", json=save, headers=creds(mine))).json()
        assert again["data"]["saveMemories"][0]["outcome"] == "CREATED", again
        # a batch takes one turn for all its operations (none of them waits for another)
        answers = (await http.post("/graphql", json=[page, page], headers=creds(mine))).json()
        assert [len(a["data"]["memories"]["edges"]) for a in answers] == [1, 1], answers
        assert await stored(database_url, mine) == 1
