"""`memql.leadership`: work one instance does for all. Whatever stops a leader is logged and the
work starts again after a backoff that doubles while it keeps failing and starts over once it has
led; what belonged to the lead that ended is forgotten first. (Taking the lock is the service
level's: tests/service.)"""

from __future__ import annotations

import asyncio
import logging

import pytest

from memql import leadership


class Flaky(leadership.Supervised):
    """Fails at once, except on the tries listed in `leads_on`, where it leads, then fails."""

    label = "flaky work"

    def __init__(self, tries: int, leads_on: set[int]) -> None:
        super().__init__()
        self.tries = tries
        self.leads_on = leads_on
        self.started = 0
        self.stood_down_as: list[str] = []
        self.done = asyncio.Event()

    async def lead(self) -> None:
        self.started += 1
        if self.started > self.tries:
            self.done.set()
            await asyncio.Event().wait()  # until cancelled
        if self.started in self.leads_on:
            self.role = "leader"
        raise RuntimeError(f"failure {self.started}")

    def stood_down(self) -> None:
        self.stood_down_as.append(self.role)


async def supervise(work: Flaky) -> None:
    async with leadership.running(work):
        await asyncio.wait_for(work.done.wait(), 10)


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    # the same doubling on a millisecond scale
    monkeypatch.setattr(leadership, "FIRST_DELAY", 0.001)
    monkeypatch.setattr(leadership, "MOST_DELAY", 0.008)


def restarts(caplog: pytest.LogCaptureFixture) -> list[float]:
    return [
        r.args[2]  # type: ignore[index]
        for r in caplog.records
        if r.name == "memql.leadership" and "restarting in" in r.msg
    ]


async def test_a_failing_worker_waits_twice_as_long_each_time_up_to_the_most(
    quick: None, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, "memql.leadership")
    work = Flaky(tries=6, leads_on=set())
    await supervise(work)
    assert restarts(caplog) == [0.001, 0.002, 0.004, 0.008, 0.008, 0.008]
    assert work.role == "standby"
    assert work.stood_down_as == ["standby"] * 6
    assert "flaky work stopped (failure 1); restarting in 0.0s" in caplog.messages


async def test_a_leader_that_fails_gives_up_its_role_before_what_it_held_is_forgotten(
    quick: None, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, "memql.leadership")
    work = Flaky(tries=5, leads_on={3})
    await supervise(work)
    assert f"flaky work {work.name} gave up leadership" in caplog.messages
    assert work.stood_down_as == ["standby"] * 5


async def test_once_it_has_led_the_backoff_starts_over_as_its_log_says(
    quick: None, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, "memql.leadership")
    await supervise(Flaky(tries=5, leads_on={3}))
    # the third try led before it failed: the wait after it is the first one again
    assert restarts(caplog) == [0.001, 0.002, 0.001, 0.002, 0.004]


async def test_the_work_runs_only_within_its_block():
    work = Flaky(tries=0, leads_on=set())
    async with leadership.running(work) as running:
        assert running is work
        await asyncio.wait_for(work.done.wait(), 10)
        [task] = [t for t in asyncio.all_tasks() if t.get_name() == "memql-flaky-work"]
    assert task.cancelled()
