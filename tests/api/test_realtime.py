"""memoryEvents on one instance (in-memory broadcast): order, seams, visibility, authorization."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
import websockets

from tests.operations import RETIRE, SAVE
from tests.ws import EventSubscription, StreamEnded


async def cursors_in_log(db, project_id, user: str) -> list[str]:
    """The cursors `user` may read (its user scope and the project scope), in order."""
    cur = await db.execute(
        "select cursor from memory_events where project_id = %s"
        " and (scope = 'project' or owner_id = %s) order by cursor",
        (project_id, user),
    )
    return [str(c) for (c,) in await cur.fetchall()]


def save(content: str, **more):
    return {"input": {"content": content, "kind": "EPISODIC", **more}}


async def test_a_subscriber_gets_each_readable_event_once_in_cursor_order(
    server, alice, bob, tenant, db
):
    async with EventSubscription(server, tenant.key, "alice") as sub:
        a = (await alice.ok(SAVE, save("Alice met Carol on 2026-03-02.")))["saveMemory"]
        await bob.ok(SAVE, save("Bob met Dan on 2026-03-03."))
        await alice.ok(SAVE, save("Team offsite on 2026-04-01.", scope="PROJECT"))
        await alice.ok(RETIRE, {"id": a["memory"]["id"]})
        events = await sub.take(3)
        assert await sub.quiet(0.5) == []

    assert [e["cursor"] for e in events] == await cursors_in_log(db, tenant.project_id, "alice")
    assert [(e["type"], e["scope"]) for e in events] == [
        ("memory.created", "USER"),
        ("memory.created", "PROJECT"),
        ("memory.retired", "USER"),
    ]
    # the memory as the list shows it: the retired one carries invalidatedAt
    retired = events[2]["memory"]
    assert retired["id"] == a["memory"]["id"]
    assert retired["invalidationReason"] == "retired" and retired["invalidatedAt"]


async def test_since_replays_then_goes_live_with_no_gap_and_no_duplicate(server, alice, tenant, db):
    for i in range(3):
        await alice.ok(SAVE, save(f"Visit number {i} on 2026-05-0{i + 1}."))
    first, *_ = await cursors_in_log(db, tenant.project_id, "alice")

    async with EventSubscription(server, tenant.key, "alice", since=first) as sub:
        replayed = await sub.take(2)
        for i in range(3, 6):
            await alice.ok(SAVE, save(f"Visit number {i} on 2026-05-0{i + 1}."))
        live = await sub.take(3)
        assert await sub.quiet(0.5) == []

    log = await cursors_in_log(db, tenant.project_id, "alice")
    assert [e["cursor"] for e in replayed + live] == log[1:]


async def test_an_event_that_commits_after_a_later_cursor_is_delivered_in_order(
    server, alice, tenant, db, database_url
):
    """Transactions commit out of cursor order: the relay holds later cursors back until the
    earlier transaction has ended, so nothing is skipped and the order is kept."""
    async with EventSubscription(server, tenant.key, "alice") as sub:
        await alice.ok(SAVE, save("Before the slow write, 2026-06-01."))
        [before] = await sub.take(1)
        async with await psycopg.AsyncConnection.connect(database_url) as slow:
            # a write's event row, in a transaction left open while others commit
            cur = await slow.execute(
                "with tx as materialized (select pg_current_xact_id() as xid)"
                " insert into memory_events (project_id, scope, owner_id, type, actor_id)"
                " select %s, 'user', 'alice', 'memory.erased', 'alice' from tx"
                " where tx.xid is not null returning cursor",
                (tenant.project_id,),
            )
            (slow_cursor,) = await cur.fetchone()
            for i in range(3):
                await alice.ok(SAVE, save(f"Quick write {i} on 2026-06-1{i}."))
            # the three later cursors are committed, but the earlier one is still open
            assert await sub.quiet(1.0) == []
            await slow.commit()
        after = await sub.take(4)

    cursors = [int(e["cursor"]) for e in after]
    assert cursors[0] == slow_cursor and cursors == sorted(cursors)
    assert [before["cursor"], *map(str, cursors)] == await cursors_in_log(
        db, tenant.project_id, "alice"
    )


async def test_a_rolled_back_event_does_not_hold_back_later_ones(
    server, alice, tenant, db, database_url
):
    async with EventSubscription(server, tenant.key, "alice") as sub:
        async with await psycopg.AsyncConnection.connect(database_url) as doomed:
            await doomed.execute(
                "with tx as materialized (select pg_current_xact_id() as xid)"
                " insert into memory_events (project_id, scope, owner_id, type, actor_id)"
                " select %s, 'user', 'alice', 'memory.erased', 'alice' from tx"
                " where tx.xid is not null",
                (tenant.project_id,),
            )
            for i in range(2):
                await alice.ok(SAVE, save(f"Written past a doomed write, take {i}."))
            assert await sub.quiet(0.7) == []
            await doomed.rollback()
        events = await sub.take(2, within=5)

    assert [e["cursor"] for e in events] == await cursors_in_log(db, tenant.project_id, "alice")


async def test_concurrent_writes_of_many_owners_reach_each_subscriber_exactly_once(
    server, http, tenant, db
):
    from memql.testing import GraphQLClient

    users = ["alice", "bob", "carol"]
    clients = {u: GraphQLClient(http, tenant.key, u) for u in users}
    # from the newest cursor: a write that commits before the server has taken the subscribe
    # message is replayed from the log, not missed
    cur = await db.execute("select coalesce(max(cursor), 0) from memory_events")
    (newest,) = await cur.fetchone()
    subs = [EventSubscription(server, tenant.key, u, since=str(newest)) for u in users]
    for sub in subs:
        await sub.__aenter__()
    try:
        writes = [
            clients[users[i % 3]].ok(
                SAVE,
                save(f"Event {i} logged on day {i}.", scope="PROJECT" if i % 4 == 0 else "USER"),
            )
            for i in range(36)
        ]
        await asyncio.gather(*writes)
        for user, sub in zip(users, subs, strict=True):
            expected = await cursors_in_log(db, tenant.project_id, user)
            try:
                received = await sub.take(len(expected))
            except AssertionError as missing:
                raise AssertionError(f"{user}: expected {expected}; {missing}") from None
            assert [e["cursor"] for e in received] == expected
            assert await sub.quiet(0.3) == []
    finally:
        for sub in subs:
            await sub.__aexit__()


async def test_a_user_scope_subscription_sees_no_project_events(server, alice, tenant):
    async with EventSubscription(server, tenant.key, "alice", scope="USER") as sub:
        await alice.ok(SAVE, save("Shared plan for 2026-07-01.", scope="PROJECT"))
        await alice.ok(SAVE, save("Alice's dentist on 2026-07-02."))
        [event] = await sub.take(1)
        assert event["scope"] == "USER"
        assert await sub.quiet(0.5) == []


async def test_a_bad_since_is_refused_with_bad_user_input(server, tenant):
    async with EventSubscription(server, tenant.key, "alice", since="yesterday") as sub:
        try:
            await sub.next()
        except StreamEnded as ended:
            assert ended.code == "BAD_USER_INPUT"
        else:
            raise AssertionError("the subscription should have been refused")


async def test_a_revoked_key_ends_the_stream_within_five_seconds(server, alice, tenant, db):
    async with EventSubscription(server, tenant.key, "alice") as sub:
        await alice.ok(SAVE, save("Still allowed on 2026-08-01."))
        await sub.take(1)
        await db.execute(
            "update api_keys set revoked_at = now() where project_id = %s", (tenant.project_id,)
        )
        started = asyncio.get_running_loop().time()
        try:
            await sub.next(wait=6)
        except StreamEnded as ended:
            assert ended.code == "UNAUTHENTICATED"
            assert "revoked" in ended.errors[0]["message"]
        else:
            raise AssertionError("a revoked key kept its stream")
        assert asyncio.get_running_loop().time() - started < 5


async def test_an_unknown_key_is_refused_at_connection_init(server):
    with pytest.raises(websockets.ConnectionClosed) as closed:
        async with EventSubscription(server, f"mq_{uuid.uuid4().hex}", "alice", since=None):
            pass
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403
