"""memoryEvents at its edges: a `since` beyond the log, a `since` whose event was erased,
subscriptions sent over HTTP (multipart streams, or a clear 400 when no stream was asked for),
and credential changes reaching open streams on every transport before their next delivery."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest

from memql.model import Access, Grant
from memql.settings import Settings
from memql.testing import Tenant, serving
from memql.testing.database import log_event
from tests.operations import ERASE, SAVE
from tests.ws import MEMORY_EVENTS, EventSubscription, StreamEnded, WsSession, event_cursor

MULTIPART = "multipart/mixed;subscriptionSpec=1.0,application/json"


def save(content: str, **more: Any) -> dict[str, Any]:
    return {"input": {"content": content, "kind": "EPISODIC", **more}}


async def last_issued(db, project_id) -> int:
    """The project's counter: the newest cursor of its log (cursors count per project)."""
    cur = await db.execute(
        "select coalesce((select last from project_cursors where project_id = %s), 0)",
        (project_id,),
    )
    (value,) = await cur.fetchone()
    return int(value)


async def test_a_since_beyond_the_end_of_the_log_is_bad_user_input(server, alice, tenant, db):
    await alice.ok(SAVE, save("A cursor exists now, 2026-09-01."))
    beyond = str(await last_issued(db, tenant.project_id) + 1000)
    async with EventSubscription(server, tenant.key, "alice", since=beyond) as sub:
        try:
            await sub.next()
        except StreamEnded as ended:
            assert ended.code == "BAD_USER_INPUT"
            assert "beyond the end of the event log" in ended.errors[0]["message"]
        else:
            raise AssertionError("a cursor the log never reached was accepted")


async def test_the_newest_cursor_is_a_valid_since(server, alice, tenant, db):
    await alice.ok(SAVE, save("Before subscribing, 2026-09-02."))
    newest = str(await last_issued(db, tenant.project_id))
    async with EventSubscription(server, tenant.key, "alice", since=newest) as sub:
        await alice.ok(SAVE, save("After subscribing, 2026-09-03."))
        [event] = await sub.take(1)
    assert int(event["cursor"]) > int(newest)


async def test_a_stream_from_the_viewers_event_cursor_gets_what_was_saved_before_it_started(
    server, alice, tenant
):
    """A client that reads `viewer.eventCursor` before subscribing needs no wait for the
    subscription to be set up: what commits in between is replayed, then the stream goes live."""
    cursor = (await alice.ok("{ viewer { eventCursor } }"))["viewer"]["eventCursor"]
    before = await alice.ok(SAVE, save("Saved before the subscription, 2026-09-06."))
    async with EventSubscription(server, tenant.key, "alice", since=cursor) as sub:
        [replayed] = await sub.take(1)
        after = await alice.ok(SAVE, save("Saved once it was live, 2026-09-07."))
        [live] = await sub.take(1)
        assert await sub.quiet(0.5) == []
    assert replayed["memoryId"] == before["saveMemory"]["memory"]["id"]
    assert live["memoryId"] == after["saveMemory"]["memory"]["id"]
    assert int(cursor) < int(replayed["cursor"]) < int(live["cursor"])


async def test_a_since_whose_event_was_erased_resumes_right_after_it(server, alice, tenant, db):
    """The log keeps every event except those erasure removes; cursors stay ordered, so the
    cursor of an erased event still marks a place in the log."""
    gone = (await alice.ok(SAVE, save("Erase me later, 2026-09-04.")))["saveMemory"]["memory"]
    cur = await db.execute("select cursor from memory_events where memory_id = %s", (gone["id"],))
    (erased_cursor,) = await cur.fetchone()
    kept = (await alice.ok(SAVE, save("Keep me, 2026-09-05.")))["saveMemory"]["memory"]
    await alice.ok(ERASE, {"id": gone["id"]})

    async with EventSubscription(server, tenant.key, "alice", since=str(erased_cursor)) as sub:
        created, erased = await sub.take(2)
        assert await sub.quiet(0.5) == []
    assert (created["type"], created["memoryId"]) == ("memory.created", kept["id"])
    assert (erased["type"], erased["memory"]) == ("memory.erased", None)


async def test_a_subscription_posted_without_asking_for_a_stream_is_a_400_with_a_code(http, alice):
    for accept in ("application/json", "application/graphql-response+json"):
        response = await http.post(
            "/graphql",
            json={"query": MEMORY_EVENTS},
            headers={**alice.headers(), "Accept": accept},
        )
        assert response.status_code == 400, response.text
        [error] = response.json()["errors"]
        assert error["extensions"]["code"] == "BAD_REQUEST"
        assert "multipart/mixed" in error["message"]

    response = await http.get("/graphql", params={"query": MEMORY_EVENTS}, headers=alice.headers())
    assert response.status_code == 400, response.text
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


async def test_a_query_that_merely_mentions_subscription_still_runs(alice):
    data = await alice.ok('query { memories(contains: "subscription") { edges { cursor } } }')
    assert data["memories"]["edges"] == []


class MultipartStream:
    """The payloads of Apollo's multipart subscription protocol, one at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.chunks = response.aiter_text()
        self.buffer = ""

    async def next(self) -> dict[str, Any]:
        """The next payload (heartbeats `{}` skipped); raises StopAsyncIteration at the end."""
        while True:
            while "\r\n--graphql" not in self.buffer:
                self.buffer += await anext(self.chunks)
            part, self.buffer = self.buffer.split("\r\n--graphql", 1)
            body = part.partition("\r\n\r\n")[2].strip()
            if body.startswith("{"):
                message = json.loads(body)
                if message:
                    payload: dict[str, Any] = message["payload"]
                    return payload


async def test_apollo_multipart_http_subscriptions_replay_then_go_live(
    server, http, alice, tenant, db
):
    await alice.ok(SAVE, save("Replayed over HTTP, 2026-09-06."))
    since = str(await last_issued(db, tenant.project_id) - 1)
    body = {"query": MEMORY_EVENTS, "variables": {"since": since}}
    headers = {**alice.headers(), "Accept": MULTIPART}
    async with http.stream("POST", "/graphql", json=body, headers=headers, timeout=20) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("multipart/mixed")
        stream = MultipartStream(r)
        replayed = (await stream.next())["data"]["memoryEvents"]
        await alice.ok(SAVE, save("Live over HTTP, 2026-09-07."))
        live = (await stream.next())["data"]["memoryEvents"]
    assert replayed["cursor"] == str(int(since) + 1)
    assert int(live["cursor"]) > int(replayed["cursor"])
    assert live["memory"]["content"] == "Live over HTTP, 2026-09-07."


async def test_a_multipart_subscription_with_a_bad_since_ends_with_bad_user_input(
    http, alice, tenant, db
):
    beyond = str(await last_issued(db, tenant.project_id) + 1000)
    body = {"query": MEMORY_EVENTS, "variables": {"since": beyond}}
    headers = {**alice.headers(), "Accept": MULTIPART}
    async with http.stream("POST", "/graphql", json=body, headers=headers, timeout=20) as r:
        payload = await MultipartStream(r).next()
    assert payload["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_a_multipart_subscription_ends_when_its_key_is_revoked(
    server, http, alice, tenant, db
):
    since = await event_cursor(server, alice.headers())
    body = {"query": MEMORY_EVENTS, "variables": {"since": since}}
    headers = {**alice.headers(), "Accept": MULTIPART}
    async with http.stream("POST", "/graphql", json=body, headers=headers, timeout=20) as r:
        stream = MultipartStream(r)
        await alice.ok(SAVE, save("Still allowed over HTTP, 2026-09-08."))
        assert (await stream.next())["data"]["memoryEvents"]["type"] == "memory.created"
        await db.execute(
            "update api_keys set revoked_at = now() where project_id = %s", (tenant.project_id,)
        )
        ended = await stream.next()
    assert ended["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


# --- a credential change reaches open streams before their next delivery -----------------------
#
# On every transport: the stream receives an event, the credential changes in the database, an
# event commits right after; that event never arrives and the stream ends with the change's code.
# The server re-checks on its own schedule only once a minute, so what ends the stream is the
# change itself, not the periodic pass.

NARROWED = Grant(user=Access.READ_WRITE, project=Access.NONE)
TRANSPORTS = ["graphql-transport-ws", "graphql-ws", "multipart"]
CHANGES = {
    "key revoked": (
        "update api_keys set revoked_at = now() where project_id = %s",
        "UNAUTHENTICATED",
    ),
    "project disabled": ("update projects set memory_enabled = false where id = %s", "NOT_FOUND"),
    # an agent key made a client key: the client grant reads no project scope
    "grant narrowed": (
        "update api_keys set consumer = 'client' where project_id = %s",
        "FORBIDDEN",
    ),
}


@pytest.fixture(scope="module")
async def slow_recheck_server(database_url, embedder) -> AsyncIterator[str]:
    settings = Settings(database_url=database_url, auth_recheck_seconds=60, client_grant=NARROWED)
    async with serving(settings, embedder) as url:
        yield url


class Stream:
    """One memoryEvents subscription over one transport; `next()` is the next result
    (`{"data": ...}` or `{"errors": [...]}`), `{}` once the server ended the stream."""

    def __init__(self, base_url: str, tenant: Tenant, transport: str) -> None:
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice"}
        self.transport = transport
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Stream:
        since = await event_cursor(self.base_url, self.headers)
        variables = {"since": since}
        if self.transport == "multipart":
            http = await self._stack.enter_async_context(
                httpx.AsyncClient(base_url=self.base_url, timeout=20)
            )
            response = await self._stack.enter_async_context(
                http.stream(
                    "POST",
                    "/graphql",
                    json={"query": MEMORY_EVENTS, "variables": variables},
                    headers={**self.headers, "Accept": MULTIPART},
                )
            )
            assert response.status_code == 200
            self.multipart = MultipartStream(response)
        else:
            self.ws = await self._stack.enter_async_context(
                WsSession(self.base_url, self.headers, self.transport)
            )
            self.op = await self.ws.start(MEMORY_EVENTS, variables)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def next(self, wait: float = 10.0) -> dict[str, Any]:
        if self.transport != "multipart":
            return await self.ws.result(self.op, wait)
        try:
            return await asyncio.wait_for(self.multipart.next(), wait)
        except StopAsyncIteration:
            return {}


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_no_event_committed_after_a_credential_change_reaches_an_open_stream(
    slow_recheck_server, database_url, tenant, db, transport, change
):
    statement, code = CHANGES[change]
    async with asyncio.timeout(30), Stream(slow_recheck_server, tenant, transport) as stream:
        before, _ = await log_event(database_url, tenant.project_id)
        first = await stream.next()
        assert first["data"]["memoryEvents"]["cursor"] == str(before), first

        await db.execute(statement, (tenant.project_id,))
        after, _ = await log_event(database_url, tenant.project_id)

        ended = await stream.next()
        assert not (ended.get("data") or {}).get("memoryEvents"), (
            f"event {after}, committed after the {change}, was delivered: {ended}"
        )
        assert ended["errors"][0]["extensions"]["code"] == code, ended
        assert await stream.next() == {}, "the stream went on after its credentials failed"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_revoked_key_ends_an_idle_stream_at_once(
    slow_recheck_server, database_url, tenant, db, transport
):
    """No event need follow: the database's notification of the change starts a check."""
    async with asyncio.timeout(30), Stream(slow_recheck_server, tenant, transport) as stream:
        cursor, _ = await log_event(database_url, tenant.project_id)
        assert (await stream.next())["data"]["memoryEvents"]["cursor"] == str(cursor)
        revoked = time.monotonic()
        await db.execute(
            "update api_keys set revoked_at = now() where project_id = %s", (tenant.project_id,)
        )
        ended = await stream.next()
        assert ended["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED", ended
        # the periodic check is a minute away: this was the notification
        assert time.monotonic() - revoked < 10
