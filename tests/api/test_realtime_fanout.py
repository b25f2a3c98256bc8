"""Fan-out that scales with events, not with events x subscribers: a live event is executed
once per distinct selection on an instance, and the credentials of all live streams are checked
again in one pass, one lookup per distinct credential."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from contextlib import AsyncExitStack
from dataclasses import replace

import websockets

from memql import metrics
from memql.access.authenticate import Authenticator, policy_from
from memql.db.pool import open_pool
from memql.errors import MemqlError, Unauthenticated
from memql.model import Access, Consumer, Grant, Principal, Scope
from memql.realtime.recheck import Recheck, Rechecker
from memql.settings import Settings
from memql.testing import newest_cursor
from tests.operations import SAVE
from tests.ws import EventSubscription, WsSession

FULL = """
subscription Full($since: String) {
  memoryEvents(scope: PROJECT, since: $since) { cursor type memory { content } }
}
"""
CHOOSING = """
subscription Choosing($withMemory: Boolean!) {
  memoryEvents(scope: PROJECT) { cursor memory @include(if: $withMemory) { content } }
}
"""


def counted(name: str) -> float:
    return metrics.REGISTRY.get_sample_value(name) or 0.0


def streams() -> float:
    """Streams set up on this instance: each receives every event published from now on."""
    return counted("memql_realtime_subscriptions")


async def until_set_up(count: float) -> None:
    for _ in range(1000):
        if streams() >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{streams()} streams set up, {count} expected")


class Custom(EventSubscription):
    def __init__(self, server, key, user, query, variables) -> None:
        super().__init__(server, key, user)
        self.query, self.variables = query, variables

    async def __aenter__(self) -> Custom:
        self.ws = await websockets.connect(
            self.url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")]
        )
        await self.ws.send(json.dumps({"type": "connection_init", "payload": self.init}))
        await self.ws.recv()
        payload = {"query": self.query, "variables": self.variables}
        await self.ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        return self


async def newest(db, project_id) -> str:
    return str(await newest_cursor(db, project_id))


async def test_a_live_event_is_executed_once_per_distinct_selection(server, alice, tenant, db):
    since = await newest(db, tenant.project_id)
    already = streams()
    async with AsyncExitStack() as stack:
        # the same selection, different users and different `since`: one execution between them
        same = [
            await stack.enter_async_context(
                Custom(server, tenant.key, f"watcher-{i}", FULL, {"since": since if i else None})
            )
            for i in range(4)
        ]
        # a variable used inside the selection makes a distinct rendering
        bare = await stack.enter_async_context(
            Custom(server, tenant.key, "bare", CHOOSING, {"withMemory": False})
        )
        full = await stack.enter_async_context(
            Custom(server, tenant.key, "full", CHOOSING, {"withMemory": True})
        )
        await until_set_up(already + len(same) + 2)
        before = counted("memql_realtime_event_renders_total")
        await alice.ok(SAVE, {"input": {"content": "Standup moved to 10:00.", "kind": "EPISODIC",
                                        "scope": "PROJECT"}})  # fmt: skip
        seen = [(await s.take(1))[0] for s in same]
        [without] = await bare.take(1)
        [with_memory] = await full.take(1)
        renders = counted("memql_realtime_event_renders_total") - before

    assert all(e == seen[0] for e in seen), seen
    assert seen[0]["memory"]["content"] == "Standup moved to 10:00."
    assert (
        "memory" not in without and with_memory["memory"]["content"] == seen[0]["memory"]["content"]
    )
    assert renders == 3  # FULL once for four sockets, CHOOSING once per value of $withMemory


def principal_of(tenant, user: str) -> Principal:
    return Principal(
        project_id=tenant.project_id,
        project_name=tenant.project_name,
        user_id=user,
        consumer=Consumer.AGENT,
        grant=Grant(user=Access.READ_WRITE, project=Access.READ_WRITE),
    )


async def test_one_pass_checks_every_stream_with_one_call_per_checker(tenant):
    calls: list[int] = []
    withdrawn = {"user-2"}

    async def check_many(credentials) -> list[Principal | MemqlError]:
        calls.append(len(credentials))
        outcomes: list[Principal | MemqlError] = []
        for c in credentials:
            alice = principal_of(tenant, c["X-User-Id"])
            if c["X-User-Id"] in withdrawn:
                alice = replace(alice, grant=Grant(user=Access.READ, project=Access.NONE))
            outcomes.append(alice)
        return outcomes

    async def epoch() -> int:
        return 0

    rechecker = Rechecker(interval=60)
    woken: list[str] = []
    async with AsyncExitStack() as stack:
        watches = [
            stack.enter_context(
                rechecker.watch(
                    Recheck(check_many, {"X-User-Id": f"user-{i}"}, epoch),
                    [Scope.USER, Scope.PROJECT],
                    lambda i=i: woken.append(f"user-{i}"),
                )
            )
            for i in range(5)
        ]
        await rechecker.check_all()
    assert calls == [5]
    assert woken == ["user-2"]
    assert [w.failure is not None for w in watches] == [False, False, True, False, False]
    assert watches[2].failure is not None and watches[2].failure.code == "FORBIDDEN"


async def test_streams_sharing_an_api_key_resolve_it_once_and_all_end_when_it_is_revoked(
    database_url, tenant, db
):
    pool = await open_pool(database_url, min_size=1, max_size=2)
    try:
        authenticator = Authenticator(pool, policy_from(Settings(database_url=database_url)))
        credentials = [
            [("Authorization", f"Bearer {tenant.key}"), ("X-User-Id", f"user-{i}")]
            for i in range(5)
        ]
        before = counted("memql_realtime_credential_rechecks_total")
        outcomes = await authenticator.authenticate_many(credentials)
        assert counted("memql_realtime_credential_rechecks_total") - before == 1
        assert [o.user_id for o in outcomes if isinstance(o, Principal)] == [
            f"user-{i}" for i in range(5)
        ]
        assert all(o.project_id == tenant.project_id for o in outcomes if isinstance(o, Principal))

        await db.execute(
            "update api_keys set revoked_at = now() where project_id = %s", (tenant.project_id,)
        )
        unknown = [("Authorization", f"Bearer mq_{uuid.uuid4().hex}"), ("X-User-Id", "eve")]
        outcomes = await authenticator.authenticate_many([*credentials, unknown])
        assert all(isinstance(o, Unauthenticated) for o in outcomes), outcomes
    finally:
        await pool.close()


async def test_live_events_written_straight_to_sockets_are_each_protocols_own_messages(
    server, alice, tenant
):
    """Subscribers after the first of a selection get the event written straight to their
    socket: still the protocol's own message, with each subscription's own id, on both
    protocols and with several subscriptions on one socket."""
    init = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "watcher"}
    before = streams()
    async with AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(WsSession(server, init, protocol))
            for protocol in ("graphql-transport-ws", "graphql-ws", "graphql-transport-ws")
        ]
        ids = [{await s.start(FULL), await s.start(FULL)} for s in sessions]
        await until_set_up(before + 6)
        renders = counted("memql_realtime_event_renders_total")
        writes = counted("memql_realtime_live_writes_total")
        await alice.ok(SAVE, {"input": {"content": "Release freeze on Friday.", "kind": "EPISODIC",
                                        "scope": "PROJECT"}})  # fmt: skip
        received = [
            [json.loads(await asyncio.wait_for(s.ws.recv(), 10)) for _ in range(2)]
            for s in sessions
        ]
        renders = counted("memql_realtime_event_renders_total") - renders
        writes = counted("memql_realtime_live_writes_total") - writes

    event = received[0][0]["payload"]["data"]["memoryEvents"]
    assert event["memory"] == {"content": "Release freeze on Friday."}
    for session, own, messages in zip(sessions, ids, received, strict=True):
        assert {m["id"] for m in messages} == own
        for message in messages:
            assert set(message) == {"id", "type", "payload"}
            assert message["type"] == ("data" if session.legacy else "next")
            assert message["payload"] == {"data": {"memoryEvents": event}}
    # one execution for six subscriptions; the other five written as encoded
    assert (renders, writes) == (1, 5)


async def test_a_subscriber_that_vanishes_mid_stream_is_let_go_while_the_others_keep_receiving(
    server, alice, tenant, caplog
):
    """A socket cut without a close handshake while live events flow ends its subscription
    quietly (no error logged, the stream and its inbox released); the subscriptions of another
    socket miss nothing and keep their order."""

    def init(user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tenant.key}", "X-User-Id": user}

    async def save(text: str) -> None:
        await alice.ok(SAVE, {"input": {"content": text, "kind": "EPISODIC", "scope": "PROJECT"}})

    before = streams()
    async with WsSession(server, init("stays"), "graphql-transport-ws") as stays:
        leaver = await WsSession(server, init("leaves"), "graphql-ws").__aenter__()
        watchers = [await stays.start(FULL), await stays.start(FULL), await leaver.start(FULL)]
        await until_set_up(before + len(watchers))
        assert streams() == before + len(watchers)
        await save("Quarterly planning starts Monday.")
        await leaver.result(watchers[2])
        leaver.ws.transport.abort()  # gone without a close handshake
        for n in range(5):
            await save(f"Planning note {n}: budgets due Thursday.")
        for _ in range(200):
            if streams() <= before + 2:
                break
            await asyncio.sleep(0.05)
        released = streams() == before + 2
        messages = [json.loads(await asyncio.wait_for(stays.ws.recv(), 10)) for _ in range(12)]

    assert released
    cursors = {
        op: [int(m["payload"]["data"]["memoryEvents"]["cursor"]) for m in messages if m["id"] == op]
        for op in watchers[:2]
    }
    first = cursors[watchers[0]]
    assert len(first) == 6 and first == sorted(first) and cursors[watchers[1]] == first
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.records
