"""memoryEvents on one instance (in-memory broadcast): order, seams, visibility, authorization."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import psycopg
import pytest
import websockets

from memql import testing
from tests.operations import RETIRE, SAVE, SAVE_MANY
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


EVENT_TIMES = """
subscription Events($since: String) {
  memoryEvents(since: $since) {
    cursor type changedAt occurredAt memory { createdAt invalidatedAt occurredAt }
  }
}
"""


async def test_an_events_changed_at_is_its_writes_time_and_its_former_name_gives_the_same(
    server, alice, tenant
):
    """`changedAt` is when the write that made the change began: every event of one write shares
    it, and it comes before the times the write gave the memory (its `createdAt`, its
    `invalidatedAt`). It is not the memory's `occurredAt`. The deprecated `occurredAt` of an
    event is the same time, live and replayed."""
    episodes = [
        {"content": f"Ran a race in {city}.", "kind": "EPISODIC", "occurredAt": "2019-06-01"}
        for city in ("Oslo", "Rome")
    ]
    before = datetime.now(UTC)
    async with EventSubscription(server, tenant.key, "alice", query=EVENT_TIMES) as live:
        saved = (await alice.ok(SAVE_MANY, {"inputs": episodes}))["saveMemories"]
        await alice.ok(RETIRE, {"id": saved[0]["memory"]["id"]})
        events = await live.take(3)
    after = datetime.now(UTC)
    async with EventSubscription(
        server, tenant.key, "alice", since=live.variables["since"], query=EVENT_TIMES
    ) as replay:
        replayed = await replay.take(3)

    def times(e: dict) -> tuple[str, str, str]:
        return e["cursor"], e["changedAt"], e["occurredAt"]

    assert [times(e) for e in replayed] == [times(e) for e in events]
    assert [e["type"] for e in events] == ["memory.created", "memory.created", "memory.retired"]
    assert all(e["occurredAt"] == e["changedAt"] for e in events)
    first, second, retired = (datetime.fromisoformat(e["changedAt"]) for e in events)
    assert first == second  # one batch, one write
    assert before <= first < retired <= after
    for e in events[:2]:
        assert first <= datetime.fromisoformat(e["memory"]["createdAt"])
        assert e["memory"]["occurredAt"].startswith("2019-06-01")
    assert retired <= datetime.fromisoformat(events[2]["memory"]["invalidatedAt"])


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


async def draw_event(conn: psycopg.AsyncConnection, project_id: uuid.UUID) -> int:
    """A write's event, drawn from the project's counter as a write draws it, in `conn`'s
    transaction (left open)."""
    return await testing.draw_event(
        conn, project_id, scope="user", owner_id="alice", type="memory.erased", actor_id="alice"
    )


async def test_a_write_still_open_holds_its_projects_later_writes_back_then_all_arrive_in_order(
    server, alice, tenant, db, database_url
):
    """A project's cursors commit in order: a write that drew the next cursor makes the
    project's later writes wait for its end, so no later cursor is ever committed (or
    published) before an earlier one, and the stream gets them consecutively."""
    async with EventSubscription(server, tenant.key, "alice") as sub:
        await alice.ok(SAVE, save("Before the slow write, 2026-06-01."))
        [before] = await sub.take(1)
        async with await psycopg.AsyncConnection.connect(database_url) as slow:
            slow_cursor = await draw_event(slow, tenant.project_id)
            quick = [
                asyncio.create_task(alice.ok(SAVE, save(f"Quick write {i} on 2026-06-1{i}.")))
                for i in range(3)
            ]
            # the quick writes wait for the slow one's counter: nothing reaches the stream
            assert await sub.quiet(1.0) == []
            assert not any(t.done() for t in quick)
            await slow.commit()
        await asyncio.gather(*quick)
        after = await sub.take(4)

    cursors = [int(e["cursor"]) for e in after]
    assert cursors == list(range(int(before["cursor"]) + 1, int(before["cursor"]) + 5))
    assert cursors[0] == slow_cursor
    assert [before["cursor"], *map(str, cursors)] == await cursors_in_log(
        db, tenant.project_id, "alice"
    )


async def test_a_rolled_back_event_leaves_no_gap_and_does_not_hold_back_later_ones(
    server, alice, tenant, db, database_url
):
    async with EventSubscription(server, tenant.key, "alice") as sub:
        await alice.ok(SAVE, save("Written before a doomed write."))
        [before] = await sub.take(1)
        async with await psycopg.AsyncConnection.connect(database_url) as doomed:
            await draw_event(doomed, tenant.project_id)
            writes = [
                asyncio.create_task(alice.ok(SAVE, save(f"Written past a doomed write, take {i}.")))
                for i in range(2)
            ]
            assert await sub.quiet(0.7) == []
            await doomed.rollback()
        await asyncio.gather(*writes)
        events = await sub.take(2, within=5)

    # the abort took its cursor back: the next write drew it
    first = int(before["cursor"])
    assert [int(e["cursor"]) for e in events] == [first + 1, first + 2]
    assert [before["cursor"]] + [e["cursor"] for e in events] == await cursors_in_log(
        db, tenant.project_id, "alice"
    )


async def test_concurrent_writes_of_many_owners_reach_each_subscriber_exactly_once(
    server, http, tenant, db
):
    from memql.testing import GraphQLClient

    users = ["alice", "bob", "carol"]
    clients = {u: GraphQLClient(http, tenant.key, u) for u in users}
    # from the newest cursor: a write that commits before the server has taken the subscribe
    # message is replayed from the log, not missed
    cur = await db.execute(
        "select coalesce(max(cursor), 0) from memory_events where project_id = %s",
        (tenant.project_id,),
    )
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
