"""`memql.realtime.bus.Inbox`: one subscriber's bounded mailbox. Events come out oldest first
with the credential epoch they were read at; past its limit it empties and says it overflowed
(the subscriber is closed and resumes from the event log). The bus itself, over Redis, is
tests/service/test_realtime_bus.py."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime

import pytest

from memql.model import EventType, MemoryEvent, Scope
from memql.realtime.bus import Inbox

PROJECT = uuid.uuid4()


def event(cursor: int) -> MemoryEvent:
    return MemoryEvent(
        cursor=cursor,
        project_id=PROJECT,
        scope=Scope.USER,
        owner_id="alice",
        type=EventType.CREATED,
        memory_id=uuid.uuid4(),
        actor_id="alice",
        changed_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_events_come_out_oldest_first_and_once():
    inbox = Inbox(limit=5)
    first, second = event(1), event(2)
    inbox.push(first, 1)
    inbox.push(second, 1)
    assert len(inbox) == 2
    assert inbox.take() == [first, second]
    assert (inbox.take(), len(inbox)) == ([], 0)


@pytest.mark.parametrize(
    ("epochs", "seen"),
    [
        ([3], 3),
        ([3, 7, 5], 7),  # the highest of the events held
        ([3, None, 5], None),  # one read at an unknown epoch makes the whole take unknown
        ([None], None),
    ],
)
def test_the_epoch_is_the_highest_of_the_events_held_or_unknown(epochs, seen):
    inbox = Inbox(limit=5)
    for n, epoch in enumerate(epochs):
        inbox.push(event(n), epoch)
    assert inbox.epoch == seen
    inbox.take()
    # taken: the next events start from nothing
    assert inbox.epoch == 0
    inbox.push(event(9), 2)
    assert inbox.epoch == 2


def test_past_its_limit_it_empties_and_stays_overflowed():
    inbox = Inbox(limit=2)
    inbox.push(event(1), 1)
    inbox.push(event(2), 1)
    assert not inbox.overflowed
    inbox.push(event(3), 1)
    assert inbox.overflowed and len(inbox) == 0
    # nothing more is kept, whatever the epoch says
    inbox.push(event(4), 9)
    assert (len(inbox), inbox.epoch) == (0, 1)
    assert inbox.overflowed


async def test_a_waiting_reader_is_woken_by_an_event_a_wake_or_a_resync():
    inbox = Inbox(limit=5)
    for wake in (lambda: inbox.push(event(1), 1), inbox.wake, inbox.mark_resync):
        reader = asyncio.create_task(inbox.wait())
        await asyncio.sleep(0)
        assert not reader.done()
        wake()
        await asyncio.wait_for(reader, 5)
    assert inbox.resync
    assert [e.cursor for e in inbox.take()] == [1]


async def test_a_wait_with_a_time_returns_when_it_passes_and_a_wake_is_seen_once():
    inbox = Inbox(limit=5)
    await asyncio.wait_for(inbox.wait(0.01), 5)  # nothing came: it returns all the same
    inbox.wake()
    await asyncio.wait_for(inbox.wait(), 5)  # a wake before the wait is not lost
    reader = asyncio.create_task(inbox.wait())
    await asyncio.sleep(0.01)
    assert not reader.done()  # ... and counts once
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader
