"""`memql.realtime.recheck`: a stream's watch of its key's expiry (`Watch`) refuses it from the
expiry on, before each delivery, and wakes the stream at the expiry. No database here: every
transport's refusal of an expired key is tested against the real server in
tests/api/test_key_expiry.py."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memql.db.tenants import KEY_REFUSED
from memql.errors import Unauthenticated
from memql.model import Access, Consumer, Grant, Principal, Scope
from memql.realtime.recheck import Recheck, Watch


async def never_called(_: object) -> list[object]:
    raise AssertionError("an expiry needs no lookup")


async def epoch() -> int:
    return 0


def principal(key_expires_at: datetime | None) -> Principal:
    grant = Grant(user=Access.READ_WRITE, project=Access.READ_WRITE)
    return Principal(
        project_id=uuid.uuid4(),
        project_name="acme",
        user_id="alice",
        consumer=Consumer.AGENT,
        grant=grant,
        key_id=uuid.uuid4(),
        key_expires_at=key_expires_at,
    )


def watch_expiring(at: datetime | None, woken: list[float]) -> Watch:
    recheck = Recheck(never_called, [("authorization", "Bearer mq_x")], epoch)
    return Watch(recheck, [Scope.USER], lambda: woken.append(time.time()), at)


async def test_a_stream_without_an_expiry_is_never_refused_for_one():
    watch = watch_expiring(None, [])
    watch.refuse_if_expired()
    assert watch.failure is None


async def test_a_key_past_its_expiry_is_refused_before_a_delivery_with_the_revoked_keys_answer():
    watch = watch_expiring(datetime.now(UTC) - timedelta(milliseconds=1), [])
    with pytest.raises(Unauthenticated) as refused:
        watch.refuse_if_expired()
    assert refused.value.message == KEY_REFUSED
    assert watch.failure is refused.value


async def test_the_watch_wakes_its_stream_at_the_expiry_and_not_before():
    woken: list[float] = []
    expires = datetime.now(UTC) + timedelta(seconds=0.3)
    watch = watch_expiring(expires, woken)
    watch.refuse_if_expired()  # not yet
    await asyncio.sleep(0.15)
    assert woken == [] and watch.failure is None
    await asyncio.sleep(0.35)
    assert len(woken) == 1
    assert woken[0] >= expires.timestamp()
    assert isinstance(watch.failure, Unauthenticated)
    assert watch.failure.message == KEY_REFUSED


async def test_a_later_expiry_confirmed_by_a_pass_moves_the_wake_and_a_stopped_watch_never_wakes():
    woken: list[float] = []
    watch = watch_expiring(datetime.now(UTC) + timedelta(seconds=0.1), woken)
    # a pass finds the key extended (its expiry changed in the database)
    later = datetime.now(UTC) + timedelta(seconds=0.3)
    watch.judge(principal(later), epoch=1)
    assert watch.confirmed == 1
    await asyncio.sleep(0.2)
    assert woken == []
    watch.refuse_if_expired()
    await asyncio.sleep(0.2)
    assert len(woken) == 1

    stopped: list[float] = []
    other = watch_expiring(datetime.now(UTC) + timedelta(seconds=0.1), stopped)
    other.stop()
    await asyncio.sleep(0.2)
    assert stopped == [] and other.failure is None
