"""Webhooks against a real HTTP receiver: signed, in cursor order, retried through failures and
timeouts, resumed after a restart, nothing lost and nothing skipped; and who may register where."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from memql import cli
from memql.embeddings.local import LocalEmbedder
from memql.model import Access, Grant, MemoryEvent, Scope, Webhook
from memql.settings import Settings
from memql.testing import (
    Dribbler,
    GraphQLClient,
    Receiver,
    Tenant,
    dribbling_receiver,
    fresh_database,
    log_event,
    make_tenant,
    serving,
    webhook_receiver,
)
from memql.webhook_delivery import FRESH, Deliverer
from memql.webhooks import signing
from tests.operations import ERASE, MEMORY_FIELDS, RETIRE, SAVE
from tests.ws import EventSubscription

ADD = """
mutation Add($url: String!, $events: [String!]) {
  addWebhook(url: $url, events: $events) { secret webhook { id url events ackedCursor } }
}
"""
LIST = """
query { webhooks { id url events ackedCursor pendingCount failures lastError lastErrorAt
                   nextAttemptAt lastDeliveredAt } }
"""
REMOVE = "mutation Remove($id: ID!) { removeWebhook(id: $id) }"
ALL_EVENT_FIELDS = f"""
subscription Events($since: String) {{
  memoryEvents(since: $since) {{
    cursor type scope memoryId actorId changedAt occurredAt memory {{ {MEMORY_FIELDS} }}
  }}
}}
"""


def save(content: str, **more: Any) -> dict[str, Any]:
    return {"input": {"content": content, "kind": "EPISODIC", **more}}


async def until(condition: Callable[[], bool], within: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.02)


def deliverable_settings(url: str) -> Settings:
    return Settings(
        database_url=url,
        pool_min_size=1,
        pool_max_size=4,
        webhooks_allow_private=True,
        webhooks_timeout=1.0,
        webhooks_backoff_min=0.05,
        webhooks_backoff_max=0.3,
    )


@asynccontextmanager
async def delivering_server(url: str, embedder: LocalEmbedder) -> AsyncIterator[str]:
    """A server of `url` whose deliverer leads (there is no other)."""
    async with serving(deliverable_settings(url), embedder) as base:
        async with httpx.AsyncClient(base_url=base) as http:

            async def role() -> str:
                return str((await http.get("/readyz")).json()["webhooks"]["role"])

            deadline = time.monotonic() + 10
            while await role() != "leader":
                assert time.monotonic() < deadline, "the deliverer did not lead"
                await asyncio.sleep(0.05)
        yield base


@pytest.fixture(scope="module")
async def hooks_url(database_url: str) -> AsyncIterator[str]:
    # a database of its own: one deliverer leads per database, so these tests decide which
    async with fresh_database(database_url) as url:
        yield url


@pytest.fixture(scope="module")
async def hooks_server(hooks_url: str, embedder: LocalEmbedder) -> AsyncIterator[str]:
    async with delivering_server(hooks_url, embedder) as base:
        yield base


@pytest.fixture
async def hooks_tenant(hooks_url: str) -> Tenant:
    return await make_tenant(hooks_url)


@pytest.fixture
async def hooks_http(hooks_server: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=hooks_server, timeout=60) as client:
        yield client


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with webhook_receiver() as r:
        yield r


async def log_cursors(url: str, project_id: uuid.UUID, after: int, types=None) -> list[int]:
    """The project's events after `after`, in order, as the log holds them."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "select cursor from memory_events where project_id = %s and cursor > %s"
            " and (%s::text[] is null or type = any(%s::text[])) order by cursor",
            (project_id, after, types, types),
        )
        return [int(c) for (c,) in await cur.fetchall()]


def documented_verify() -> Callable[[str, dict[str, str], bytes], bool]:
    """The receiver's check as docs/webhooks.md shows it, taken from the page itself."""
    page = (Path(__file__).parents[2] / "docs" / "webhooks.md").read_text(encoding="utf-8")
    start = page.index("```python\nimport hashlib")
    code = page[start + len("```python\n") : page.index("```", start + 3)]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/webhooks.md", "exec"), namespace)
    verify: Callable[[str, dict[str, str], bytes], bool] = namespace["verify"]
    return verify


async def status_of(client: GraphQLClient, webhook_id: str) -> dict[str, Any]:
    [status] = [w for w in (await client.ok(LIST))["webhooks"] if w["id"] == webhook_id]
    return status


def in_order_without_skipping(attempts: list[int], expected: list[int]) -> bool:
    """Attempts retry an event until it is acknowledged, then move to the next: with repeats
    collapsed they are exactly the expected cursors."""
    collapsed = [c for i, c in enumerate(attempts) if i == 0 or attempts[i - 1] != c]
    return collapsed == expected


# --- registration through GraphQL -------------------------------------------------------


async def test_a_deployment_that_does_not_allow_private_targets_refuses_them(
    alice: GraphQLClient,
):
    # the default server: MEMQL_WEBHOOKS_ALLOW_PRIVATE is not set
    refused = [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://[::1]:9/",
        "http://169.254.169.254/latest",
        "http://10.0.0.8/hook",
        "ftp://example.com/",
        # IPv6 transition addresses that carry (or route to) the ones above
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[64:ff9b::a00:1]/",
        "http://[64:ff9b:1::a00:1]/",
        "http://[2002:7f00:1::]/",
        "http://[2002:a9fe:a9fe::]/",
        "http://[::7f00:1]/",
        "http://[::ffff:0:7f00:1]/",
        "http://[::ffff:7f00:1]/",
        "http://[fec0::1]/",
        "http://[2001::a9fe:a9fe]/",
    ]
    for url in refused:
        assert await alice.error(ADD, {"url": url}) == "BAD_USER_INPUT", url
    assert (await alice.ok(LIST))["webhooks"] == []


async def test_browser_tokens_cannot_manage_webhooks(http, jwt_tenant):
    import jwt as pyjwt

    tenant, secret = jwt_tenant
    token = pyjwt.encode(
        {"iss": f"https://{tenant.project_name}.example", "aud": "memql", "sub": "alice",
         "exp": int(time.time()) + 60},
        secret,
        algorithm="HS256",
    )  # fmt: skip
    browser = GraphQLClient(http, token, None)
    assert await browser.error(ADD, {"url": "https://example.com/hook"}) == "FORBIDDEN"
    assert await browser.error(LIST) == "FORBIDDEN"
    assert await browser.error(REMOVE, {"id": str(uuid.uuid4())}) == "FORBIDDEN"


async def test_a_key_whose_grant_does_not_read_both_scopes_cannot_manage_webhooks(
    hooks_url: str, embedder: LocalEmbedder, receiver: Receiver
):
    tenant = await make_tenant(hooks_url)
    settings = Settings(
        database_url=hooks_url,
        pool_min_size=1,
        pool_max_size=2,
        webhooks_allow_private=True,
        agent_grant=Grant(user=Access.READ_WRITE, project=Access.NONE),
    )
    async with (
        serving(settings, embedder) as base,
        httpx.AsyncClient(base_url=base, timeout=30) as http,
    ):
        narrow = GraphQLClient(http, tenant.key, "alice")
        assert await narrow.error(ADD, {"url": f"{receiver.url}/a"}) == "FORBIDDEN"
        assert await narrow.error(LIST) == "FORBIDDEN"


async def test_bad_event_types_and_unknown_ids_are_answered_with_codes_and_change_nothing(
    hooks_http: httpx.AsyncClient, hooks_tenant: Tenant, hooks_url: str, receiver: Receiver
):
    alice = GraphQLClient(hooks_http, hooks_tenant.key, "alice")
    url = f"{receiver.url}/a"
    assert await alice.error(ADD, {"url": url, "events": ["memory.deleted"]}) == "BAD_USER_INPUT"
    assert await alice.error(ADD, {"url": url, "events": []}) == "BAD_USER_INPUT"
    assert await alice.error(REMOVE, {"id": "not-a-uuid"}) == "BAD_USER_INPUT"
    assert await alice.error(REMOVE, {"id": str(uuid.uuid4())}) == "NOT_FOUND"
    assert (await alice.ok(LIST))["webhooks"] == []
    # another project's endpoint is not found either
    other = await make_tenant(hooks_url)
    theirs = GraphQLClient(hooks_http, other.key, "eve")
    added = (await theirs.ok(ADD, {"url": url}))["addWebhook"]["webhook"]
    assert await alice.error(REMOVE, {"id": added["id"]}) == "NOT_FOUND"
    assert [w["id"] for w in (await theirs.ok(LIST))["webhooks"]] == [added["id"]]
    assert (await theirs.ok(REMOVE, {"id": added["id"]}))["removeWebhook"] is True
    assert (await theirs.ok(LIST))["webhooks"] == []


# --- delivery -----------------------------------------------------------------------------


async def test_events_arrive_signed_in_order_through_failures_and_timeouts_without_loss(
    hooks_http: httpx.AsyncClient,
    hooks_server: str,
    hooks_tenant: Tenant,
    hooks_url: str,
    receiver: Receiver,
):
    alice = GraphQLClient(hooks_http, hooks_tenant.key, "alice")
    bob = alice.as_user("bob")
    added = (await alice.ok(ADD, {"url": f"{receiver.url}/all"}))["addWebhook"]
    secret, hook = added["secret"], added["webhook"]
    start = int(hook["ackedCursor"])
    retired_only = (
        await alice.ok(ADD, {"url": f"{receiver.url}/retired", "events": ["memory.retired"]})
    )["addWebhook"]["webhook"]
    assert retired_only["events"] == ["memory.retired"]

    # 1. the receiver answers: every user's events and the project's arrive
    a = (await alice.ok(SAVE, save("Alice flew to Lisbon on 2026-03-02.")))["saveMemory"]
    await bob.ok(SAVE, save("Bob started at the Berlin office on 2026-03-03."))
    await alice.ok(SAVE, save("The team offsite is on 2026-04-01.", scope="PROJECT"))
    await until(lambda: len(receiver.accepted("/all")) == 3, what="three deliveries")

    # 2. the receiver fails: the same event is tried again and again, never the next one
    receiver.mode = "fail"
    await alice.ok(RETIRE, {"id": a["memory"]["id"]})
    await bob.ok(SAVE, save("Bob moved to the Munich office on 2026-05-01."))
    await until(lambda: len(receiver.attempts("/all")) >= 3 + 3, what="failing attempts")
    status = await status_of(alice, hook["id"])
    assert status["failures"] >= 1 and status["lastError"] == "HTTP 500"
    assert status["nextAttemptAt"] and status["lastErrorAt"]
    assert status["pendingCount"] == 2

    # 3. the receiver takes too long: a timeout is a failure too
    receiver.mode = "hang"
    deadline = time.monotonic() + 20
    while not (await status_of(alice, hook["id"]))["lastError"].startswith("no answer within"):
        assert time.monotonic() < deadline, "no timeout recorded"
        await asyncio.sleep(0.1)
    assert any(r.status is None for r in receiver.attempts("/all"))

    # 4. the receiver recovers: the rest arrives, in order, once each
    receiver.mode = "ok"
    await alice.ok(SAVE, save("Alice's visa was approved on 2026-06-10."))
    expected = await log_cursors(hooks_url, hooks_tenant.project_id, start)
    assert len(expected) == 6
    await until(lambda: len(receiver.accepted("/all")) == 6, what="every event")
    accepted = receiver.accepted("/all")
    assert [r.cursor for r in accepted] == expected
    assert in_order_without_skipping([r.cursor for r in receiver.attempts("/all")], expected)
    receiver_check = documented_verify()
    for r in receiver.attempts("/all"):
        assert signing.verify(
            secret, r.body, r.headers["memql-timestamp"], r.headers["memql-signature"]
        )
        assert receiver_check(secret, r.headers, r.body)
        assert not receiver_check(secret, r.headers, r.body + b" ")
        assert not receiver_check("whsec_other", r.headers, r.body)
        assert r.headers["memql-event-cursor"] == str(r.cursor)
        assert r.headers["memql-webhook-id"] == hook["id"]
        assert r.headers["content-type"] == "application/json"
    assert [r.event["type"] for r in accepted] == [
        "memory.created", "memory.created", "memory.created", "memory.retired",
        "memory.created", "memory.created",
    ]  # fmt: skip
    assert {r.event["actorId"] for r in accepted} == {"alice", "bob"}
    # the change's time as `changedAt`, and under its former name too, for this release
    assert all(r.event["occurredAt"] == r.event["changedAt"] for r in accepted)

    # the filtered endpoint got its one type, undisturbed by the other's failures
    await until(lambda: len(receiver.accepted("/retired")) == 1, what="the retired event")
    assert [r.cursor for r in receiver.accepted("/retired")] == await log_cursors(
        hooks_url, hooks_tenant.project_id, start, ["memory.retired"]
    )
    status = await status_of(alice, hook["id"])
    assert status["ackedCursor"] == str(expected[-1]) and status["pendingCount"] == 0
    assert status["failures"] == 0 and status["nextAttemptAt"] is None

    # the body is the event as the subscription shows it, every field selected
    async with EventSubscription(
        hooks_server, hooks_tenant.key, "alice", since=str(start), query=ALL_EVENT_FIELDS
    ) as sub:
        seen = await sub.take(4)  # alice's own and the project's
    # (a memory shows as it is when the event is read: the one retired since was live then)
    # (and a subscriber is not told which user changed a project memory; the webhook is)
    by_cursor = {
        r.event["cursor"]: {
            **r.event,
            "actorId": r.event["actorId"] if r.event["scope"] == "USER" else None,
        }
        for r in accepted
    }
    retired_id = a["memory"]["id"]
    for event in seen:
        delivered = by_cursor[event["cursor"]]
        if event["memoryId"] == retired_id and event["type"] == "memory.created":
            assert delivered["memory"]["invalidatedAt"] is None
            assert {**delivered, "memory": None} == {**event, "memory": None}
        else:
            assert delivered == event


async def test_an_erased_memory_is_never_delivered_after_erasure_only_its_erased_event(
    hooks_http: httpx.AsyncClient, hooks_tenant: Tenant, hooks_url: str, receiver: Receiver
):
    alice = GraphQLClient(hooks_http, hooks_tenant.key, "alice")
    start = int((await alice.ok(ADD, {"url": f"{receiver.url}/e"}))["addWebhook"]["webhook"]
                ["ackedCursor"])  # fmt: skip
    receiver.mode = "fail"
    secret_memory = (await alice.ok(SAVE, save("Alice's door code is 4711.")))["saveMemory"]
    await alice.ok(SAVE, save("Alice prefers aisle seats."))
    await until(lambda: len(receiver.attempts("/e")) >= 2, what="failing attempts")
    erased = await alice.ok(ERASE, {"id": secret_memory["memory"]["id"]})
    assert erased["eraseMemory"]["erased"] == 1
    # an attempt read just before the erasure may still go out, up to FRESH after its read
    # (the documented bound): the receiver refuses until then, so only later reads can land
    await asyncio.sleep(FRESH + 0.5)
    receiver.mode = "ok"
    await until(lambda: len(receiver.accepted("/e")) == 2, what="the rest")
    await asyncio.sleep(0.3)
    accepted = receiver.accepted("/e")
    assert [r.event["type"] for r in accepted] == ["memory.created", "memory.erased"]
    assert accepted[0].event["memory"]["content"] == "Alice prefers aisle seats."
    assert accepted[1].event["memoryId"] == secret_memory["memory"]["id"]
    assert accepted[1].event["memory"] is None
    assert [r.cursor for r in accepted] == await log_cursors(
        hooks_url, hooks_tenant.project_id, start
    )
    # no successful delivery after the erasure carried its content
    assert all("4711" not in r.body.decode() for r in accepted)


async def test_a_target_is_checked_again_when_delivering(receiver: Receiver):
    """An endpoint registered where private targets were allowed, delivered by a deliverer that
    does not allow them: the address is checked at each delivery, not trusted from before (DNS
    may answer differently later)."""
    hook = Webhook(
        id=uuid.uuid4(), project_id=uuid.uuid4(), project_name="p",
        url=f"{receiver.url}/rebound", event_types=None, created_by="operator",
        created_at=datetime.now(UTC), acked_cursor=0, last_delivered_at=None, failures=0,
        last_error=None, last_error_at=None, next_attempt_at=None,
    )  # fmt: skip
    event = MemoryEvent(
        cursor=1, project_id=hook.project_id, scope=Scope.PROJECT, owner_id="",
        type="memory.erased", memory_id=None, actor_id="alice", changed_at=datetime.now(UTC),
    )  # fmt: skip
    port = receiver.url.rsplit(":", 1)[1]
    nat64 = replace(hook, url=f"http://[64:ff9b::7f00:1]:{port}/rebound")
    async with httpx.AsyncClient(trust_env=False) as http:
        refused = await Deliverer("unused", allow_private=False).post(http, hook, "k", event)
        # the NAT64 form of the same loopback address: refused before any connection
        translated = await Deliverer("unused", allow_private=False).post(http, nat64, "k", event)
        allowed = await Deliverer("unused", allow_private=True).post(http, hook, "k", event)
    assert refused is not None and "loopback" in refused
    assert translated is not None and translated.startswith("refused:"), translated
    assert "NAT64 form of 127.0.0.1" in translated
    assert allowed is None
    assert len(receiver.attempts("/rebound")) == 1


# --- fairness between projects -------------------------------------------------------------


async def register_endpoints(
    http: httpx.AsyncClient, tenants: list[Tenant], slow: Dribbler, per_project: int
) -> None:
    """`per_project` endpoints of each tenant on the dribbling receiver, at /p<i>/e<j>/."""
    for i, tenant in enumerate(tenants):
        mallory = GraphQLClient(http, tenant.key, "mallory")
        for j in range(per_project):
            await mallory.ok(ADD, {"url": f"{slow.url}/p{i}/e{j}/"})


async def test_a_tenants_dribbling_receivers_leave_every_other_tenant_its_webhooks(
    database_url: str, embedder: LocalEmbedder, receiver: Receiver
):
    """The attack, scaled in time: five projects x 20 endpoints on a receiver that starts a 200
    and then sends one header byte every 0.1 s, so no read timeout ever fires. Each attempt
    ends at its deadline (`webhooks_timeout`, 1 s here), no project holds more than its share
    of the deliverer's connections (10 of 100 by default) nor an endpoint more than one, and a
    sixth project's event arrives at once."""
    share = 10  # the default MEMQL_WEBHOOKS_PROJECT_CONNECTIONS
    async with fresh_database(database_url) as url, dribbling_receiver(every=0.1) as slow:
        hostile = [await make_tenant(url) for _ in range(5)]
        victim = await make_tenant(url)
        async with (
            delivering_server(url, embedder) as base,
            httpx.AsyncClient(base_url=base, timeout=60) as http,
        ):
            await register_endpoints(http, hostile, slow, 20)
            alice = GraphQLClient(http, victim.key, "alice")
            await alice.ok(ADD, {"url": f"{receiver.url}/victim"})
            for tenant in hostile:
                await log_event(url, tenant.project_id)
            await until(lambda: len(slow.open()) >= 20, within=10, what="slow receivers busy")
            cursor, _ = await log_event(url, victim.project_id)
            await until(lambda: bool(receiver.accepted("/victim")), within=3, what="the victim")
            assert receiver.accepted("/victim")[0].cursor == cursor
            # the hostile attempts end at the deadline and start again after their backoff
            await until(
                lambda: sum(c.closed is not None for c in slow.connections) >= 5 * share,
                within=4,
                what="attempts ended at their deadline",
            )
            mallory = GraphQLClient(http, hostile[0].key, "mallory")
            errors = {w["lastError"] for w in (await mallory.ok(LIST))["webhooks"]}
        assert "no answer within 1 s" in errors
    lifetimes = [c.closed - c.opened for c in slow.connections if c.closed is not None]
    assert lifetimes and max(lifetimes) < 1.0 + 0.5, max(lifetimes)
    for i in range(5):
        assert slow.most_at_once(f"/p{i}/") <= share, i
        assert max(slow.most_at_once(f"/p{i}/e{j}/") for j in range(20)) == 1


async def test_a_project_that_holds_no_connection_is_served_next_when_all_are_taken(
    database_url: str, embedder: LocalEmbedder, receiver: Receiver
):
    """Every connection taken and many more attempts waiting (five hostile projects x 10
    dribbling endpoints, 4 connections, 2 a project): the next connection freed goes to the
    project that holds none, not to the attempts that queued first, so its event arrives within
    about one deadline."""
    async with fresh_database(database_url) as url, dribbling_receiver(every=0.1) as slow:
        hostile = [await make_tenant(url) for _ in range(5)]
        victim = await make_tenant(url)
        settings = replace(
            deliverable_settings(url), webhooks_connections=4, webhooks_project_connections=2
        )
        async with (
            serving(settings, embedder) as base,
            httpx.AsyncClient(base_url=base, timeout=60) as http,
        ):
            await register_endpoints(http, hostile, slow, 10)
            await GraphQLClient(http, victim.key, "alice").ok(ADD, {"url": f"{receiver.url}/v"})
            for tenant in hostile:
                await log_event(url, tenant.project_id)
            await until(lambda: len(slow.open()) == 4, within=10, what="every connection taken")
            _, committed = await log_event(url, victim.project_id)
            await until(lambda: bool(receiver.accepted("/v")), within=5, what="the victim")
            waited = receiver.accepted("/v")[0].at - committed
        assert waited < 1.0 + 1.0, waited
    assert slow.most_at_once("/") <= 4
    for i in range(5):
        assert slow.most_at_once(f"/p{i}/") <= 2


async def test_delivery_resumes_after_a_restart_from_the_last_acknowledged_cursor(
    database_url: str, embedder: LocalEmbedder, receiver: Receiver
):
    """The endpoint's position lives in the database: a new instance, after the first stopped
    while the receiver was down, delivers everything that was not acknowledged, in order."""
    async with fresh_database(database_url) as url:
        tenant = await make_tenant(url)
        async with (
            delivering_server(url, embedder) as first,
            httpx.AsyncClient(base_url=first, timeout=60) as http,
        ):
            alice = GraphQLClient(http, tenant.key, "alice")
            start = int((await alice.ok(ADD, {"url": f"{receiver.url}/r"}))["addWebhook"]
                        ["webhook"]["ackedCursor"])  # fmt: skip
            for i in range(3):
                await alice.ok(SAVE, save(f"Alice ran {i + 5} km on 2026-07-0{i + 1}."))
            await until(lambda: len(receiver.accepted("/r")) == 3, what="first deliveries")
            receiver.mode = "fail"
            for i in range(3, 6):
                await alice.ok(SAVE, save(f"Alice ran {i + 5} km on 2026-07-0{i + 1}."))
            await until(lambda: len(receiver.attempts("/r")) >= 5, what="failing attempts")
        acked = receiver.accepted("/r")[-1].cursor
        async with await psycopg.AsyncConnection.connect(url) as conn:
            cur = await conn.execute("select acked_cursor from webhook_endpoints")
            assert await cur.fetchone() == (acked,)
        receiver.mode = "ok"
        async with delivering_server(url, embedder):
            expected = await log_cursors(url, tenant.project_id, start)
            assert len(expected) == 6
            await until(lambda: len(receiver.accepted("/r")) == 6, what="the rest")
            await asyncio.sleep(0.3)
    assert [r.cursor for r in receiver.accepted("/r")] == expected
    assert in_order_without_skipping([r.cursor for r in receiver.attempts("/r")], expected)


async def test_the_cli_adds_lists_shows_status_and_removes_endpoints(
    hooks_url: str, hooks_tenant: Tenant, receiver: Receiver, monkeypatch, capsys
):
    monkeypatch.setenv("DATABASE_URL", hooks_url)
    monkeypatch.setenv("MEMQL_WEBHOOKS_ALLOW_PRIVATE", "true")

    async def memql(*argv: str) -> tuple[int, str, str]:
        status = await asyncio.to_thread(cli.main, list(argv))
        out, err = capsys.readouterr()
        return status, out, err

    status, out, _ = await memql(
        "webhooks", "add", "--project", hooks_tenant.project_name, f"{receiver.url}/cli",
        "--events", "memory.created,memory.retired",
    )  # fmt: skip
    assert status == 0
    secret = out.strip().splitlines()[-1]
    assert secret.startswith("whsec_")
    webhook_id = out.split()[2]
    status, out, _ = await memql("webhooks", "list", "--project", hooks_tenant.project_name)
    assert status == 0 and webhook_id in out and "memory.created,memory.retired" in out
    status, out, _ = await memql("webhooks", "status", "--project", hooks_tenant.project_name)
    assert status == 0 and "0 pending" in out and "acknowledged up to cursor" in out
    assert "next attempt" in out and "last error" in out

    monkeypatch.delenv("MEMQL_WEBHOOKS_ALLOW_PRIVATE")
    status, _, err = await memql(
        "webhooks", "add", "--project", hooks_tenant.project_name, f"{receiver.url}/cli"
    )
    assert status == 2 and "loopback" in err
    status, _, err = await memql(
        "webhooks", "add", "--project", hooks_tenant.project_name, "https://example.com/h",
        "--events", "memory.deleted",
    )  # fmt: skip
    assert status == 2 and "unknown event type" in err

    assert (await memql("webhooks", "remove", webhook_id))[0] == 0
    assert (await memql("webhooks", "remove", webhook_id))[0] == 1
    status, out, _ = await memql("webhooks", "list", "--project", hooks_tenant.project_name)
    assert status == 0 and webhook_id not in out
    assert out.strip() == f"no webhooks in project {hooks_tenant.project_name}"


async def test_of_two_instances_one_delivers_and_the_other_takes_over_when_it_stops(
    database_url: str, embedder: LocalEmbedder, receiver: Receiver
):
    async def role(base: str) -> str:
        async with httpx.AsyncClient(base_url=base) as http:
            return str((await http.get("/readyz")).json()["webhooks"]["role"])

    async with fresh_database(database_url) as url, AsyncExitStack() as second_stack:
        tenant = await make_tenant(url)
        async with AsyncExitStack() as first_stack:
            first = await first_stack.enter_async_context(delivering_server(url, embedder))
            second = await second_stack.enter_async_context(
                serving(deliverable_settings(url), embedder)
            )
            http = await second_stack.enter_async_context(
                httpx.AsyncClient(base_url=second, timeout=60)
            )
            alice = GraphQLClient(http, tenant.key, "alice")
            start = int((await alice.ok(ADD, {"url": f"{receiver.url}/two"}))["addWebhook"]
                        ["webhook"]["ackedCursor"])  # fmt: skip
            for i in range(4):
                await alice.ok(SAVE, save(f"Alice swam {i + 1} km on 2026-08-0{i + 1}."))
            await until(lambda: len(receiver.accepted("/two")) == 4, what="deliveries")
            await asyncio.sleep(0.5)
            assert [await role(first), await role(second)] == ["leader", "standby"]
            # delivered by one instance only: each event once
            assert len(receiver.attempts("/two")) == 4
        # the first instance has stopped; the second takes over
        for i in range(4, 7):
            await alice.ok(SAVE, save(f"Alice swam {i + 1} km on 2026-08-0{i + 1}."))
        await until(lambda: len(receiver.accepted("/two")) == 7, what="after the takeover")
        assert await role(second) == "leader"
        expected = await log_cursors(url, tenant.project_id, start)
    assert [r.cursor for r in receiver.accepted("/two")] == expected


async def test_the_python_client_registers_lists_and_removes_endpoints(hooks_server, hooks_tenant):
    from memql import AsyncClient
    from memql.client import BadUserInput

    async with AsyncClient(hooks_server, api_key=hooks_tenant.key, user_id="alice") as m:
        hook, secret = await m.add_webhook("http://127.0.0.1:9/hook", ["memory.created"])
        assert secret and hook.url == "http://127.0.0.1:9/hook"
        assert hook.events == ("memory.created",)
        assert [w.id for w in await m.webhooks()] == [hook.id]
        with pytest.raises(BadUserInput):
            await m.add_webhook("ftp://example.com/")
        assert await m.remove_webhook(hook.id) is True
        assert await m.webhooks() == []
