"""A key's name and expiry as the command line takes them (`access.credentials`), and a stream's
watch of its key's expiry (`realtime.recheck.Watch`): refused from the expiry on, before each
delivery, and woken at the expiry. No database here: every transport's refusal of an expired
key is tested against the real server in tests/api/test_key_expiry.py."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memql.access import credentials
from memql.db.tenants import KEY_REFUSED
from memql.errors import BadInput, Unauthenticated
from memql.model import Access, Consumer, Grant, Principal, Scope
from memql.realtime.recheck import Recheck, Watch

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("15m", 900),
        ("12h", 43_200),
        ("30d", 2_592_000),
        ("2w", 1_209_600),
        ("1d12h", 129_600),
        ("1h30m15s", 5_415),
        ("007s", 7),
        ("36525d", 36_525 * 86_400),
    ],
)
def test_an_expires_in_is_whole_numbers_of_units(text, seconds):
    assert credentials.expires_in(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("30", "is not a duration"),
        ("d", "is not a duration"),
        ("", "is not a duration"),
        ("30x", "is not a duration"),
        ("30D", "is not a duration"),
        ("1.5h", "is not a duration"),
        ("30 d", "is not a duration"),
        ("-5s", "is not a duration"),
        ("+5s", "is not a duration"),
        ("5s ", "is not a duration"),
        ("P30D", "is not a duration"),
        ("٣s", "is not a duration"),  # an Arabic-Indic three: int() would take it
        ("0s", "is no time at all"),
        ("0d0h", "is no time at all"),
        ("36526d", "is more than 100 years"),
        ("9" * 5000 + "s", "is more than 100 years"),
    ],
)
def test_a_bad_expires_in_is_refused_in_one_line_naming_the_value(text, says):
    with pytest.raises(BadInput) as refused:
        credentials.expires_in(text)
    message = refused.value.message
    assert message.startswith(f"--expires-in {text!r} {says}"), message
    assert "\n" not in message


def test_an_expires_at_is_an_instant_with_its_offset():
    assert credentials.expires_at("2026-12-31T23:00:00Z", NOW) == datetime(
        2026, 12, 31, 23, tzinfo=UTC
    )
    plus_one = credentials.expires_at("2026-12-31T23:00+01:00", NOW)
    assert plus_one == datetime(2026, 12, 31, 22, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tomorrow", "is not an ISO-8601 instant"),
        ("2026-13-01T00:00Z", "is not an ISO-8601 instant"),
        ("2026-12-31T23:00:00", "has no UTC offset"),
        ("2026-12-31", "has no UTC offset"),
        ("2026-06-01T12:00:00Z", "is in the past"),  # now is not later than now
        ("2020-01-01T00:00:00Z", "is in the past"),
        ("2200-01-01T00:00:00Z", "is more than 100 years away"),
    ],
)
def test_a_bad_expires_at_is_refused_in_one_line_naming_the_value(text, says):
    with pytest.raises(BadInput) as refused:
        credentials.expires_at(text, NOW)
    assert refused.value.message.startswith(f"--expires-at {text!r} {says}"), refused.value


def test_a_key_name_is_a_label_of_1_to_100_printable_characters():
    assert credentials.key_name("  ci deploy ") == "ci deploy"
    assert credentials.key_name("ключ для CI") == "ключ для CI"
    assert credentials.key_name("x" * 100) == "x" * 100
    for bad in ("", "   ", "x" * 101, "line\nbreak", "tab\there", "zero\u200bwidth", "bidi\u202e"):
        with pytest.raises(BadInput):
            credentials.key_name(bad)


# --- a stream's watch of its key's expiry -----------------------------------------------------


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
