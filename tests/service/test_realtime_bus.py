"""The bus hands a subscriber its events in the order the relay published them, also when the
subscriber follows several owners (its own and the project's) whose events interleave."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from memql.model import EventType, MemoryEvent, Scope
from memql.realtime import wire
from memql.realtime.bus import EventBus
from memql.testing import RedisProcess


def event(cursor: int, project: uuid.UUID, scope: Scope, owner: str) -> MemoryEvent:
    return MemoryEvent(
        cursor=cursor,
        project_id=project,
        scope=scope,
        owner_id=owner,
        type=EventType.CREATED,
        memory_id=uuid.uuid4(),
        actor_id=owner,
        changed_at=datetime.now(UTC),
        memory=None,
    )


@pytest.fixture(params=["memory", "redis"])
async def bus(request, tmp_path) -> AsyncIterator[EventBus]:
    redis = None
    if request.param == "redis":
        redis = RedisProcess(tmp_path)
        redis.start()
    bus = EventBus(redis.url if redis else None)
    await bus.start()
    try:
        yield bus
    finally:
        await bus.stop()
        if redis is not None:
            redis.stop()


async def test_interleaved_owners_reach_a_subscriber_in_cursor_order(bus: EventBus) -> None:
    project = uuid.uuid4()
    channel = wire.channel(project)
    alice = [(channel, wire.route(Scope.USER, "alice")), (channel, wire.route(Scope.PROJECT, ""))]
    bob = [(channel, wire.route(Scope.USER, "bob"))]
    # alice's own events and the project's alternate, with bob's in between: published in one
    # go, as the relay does with a batch of final events
    owners = [(Scope.USER, "alice"), (Scope.PROJECT, ""), (Scope.USER, "bob")] * 40
    published = [event(n, project, scope, owner) for n, (scope, owner) in enumerate(owners, 1)]
    async with bus.inbox(alice, 1000) as alices, bus.inbox(bob, 1000) as bobs:
        for _ in range(100):  # Redis: until the bus reports itself up
            if bus.state == "up":
                break
            await asyncio.sleep(0.05)
        for e in published:
            await bus.publish(wire.event_channel(e), wire.encode(e, 0))
        expected_alice = [e.cursor for e in published if e.owner_id != "bob"]
        expected_bob = [e.cursor for e in published if e.owner_id == "bob"]
        got_alice: list[int] = []
        got_bob: list[int] = []
        async with asyncio.timeout(10):
            while len(got_alice) < len(expected_alice) or len(got_bob) < len(expected_bob):
                await alices.wait(0.05)
                got_alice += [e.cursor for e in alices.take()]
                got_bob += [e.cursor for e in bobs.take()]
    assert got_alice == expected_alice
    assert got_bob == expected_bob


async def test_an_idle_inbox_is_woken_by_the_bus_without_a_timer_of_its_own() -> None:
    """A stream waits on its inbox with no timeout; the bus's one periodic wake still makes it
    look at its state when nothing arrives."""
    bus = EventBus(None, idle_wake=0.1)
    await bus.start()
    try:
        channel = wire.channel(uuid.uuid4())
        async with bus.inbox([(channel, wire.route(Scope.PROJECT, ""))], 10) as box:
            async with asyncio.timeout(2):
                await box.wait()
                await box.wait()  # and again: the wake repeats
            assert len(box) == 0
    finally:
        await bus.stop()


def test_a_message_of_the_former_shape_decodes_to_the_same_event() -> None:
    """A relay of the previous release, still leading while other instances are upgraded, sends
    an event's time as `occurred_at`: for this release it decodes to the same `changed_at`."""
    sent = event(7, uuid.uuid4(), Scope.USER, "alice")
    text = wire.encode(sent, 3)
    message = json.loads(text)
    assert message["changed_at"] == sent.changed_at.isoformat() and "occurred_at" not in message
    former = {("occurred_at" if k == "changed_at" else k): v for k, v in message.items()}
    assert wire.decode(json.dumps(former)) == wire.decode(text) == wire.Relayed(sent, 3)
