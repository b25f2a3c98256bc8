"""Redis behind Sentinel (`REDIS_URL=redis+sentinel://...`): the broadcast follows a failover
while subscribed, resubscribes on the promoted master and catches up from the event log, so
the subscriber misses nothing and gets nothing twice."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memql.model import Access, Consumer, Grant, Kind, Principal, Scope
from memql.redis_client import sentinel_parts
from memql.requests import MemoryDraft
from memql.runtime import open_memql
from memql.settings import Settings
from memql.testing import Tenant
from memql.testing.sentinel import SentinelGroup

SAVES = 40


def test_a_sentinel_url_names_its_sentinels_service_and_database():
    assert sentinel_parts("redis+sentinel://:pw@s1:26380,s2/memql/2") == (
        [("s1", 26380), ("s2", 26379)],
        "memql",
        2,
    )
    with pytest.raises(ValueError):
        sentinel_parts("redis+sentinel://s1:26379")


@pytest.fixture
async def sentinel() -> AsyncIterator[SentinelGroup]:
    group = await asyncio.to_thread(SentinelGroup, Path(tempfile.mkdtemp(prefix="memql-sentinel-")))
    try:
        yield group
    finally:
        await asyncio.to_thread(group.stop)


async def test_a_failover_while_subscribed_loses_nothing(
    sentinel: SentinelGroup, database_url: str, tenant: Tenant, embedder: Any
):
    alice = Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip
    settings = Settings(database_url=database_url, redis_url=sentinel.url, pool_max_size=4)
    # the writer's instance leads the relay; the subscriber's receives through Redis
    async with open_memql(settings, embedder=embedder) as writer:
        async with asyncio.timeout(20):
            while writer.realtime.relay.role != "leader":  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        async with open_memql(settings, embedder=embedder) as reader:
            async with asyncio.timeout(20):
                while reader.realtime.bus.state != "up":  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            since = await reader.service.event_cursor(alice)
            stream = reader.service.memory_events(alice, scope=Scope.PROJECT, since=since)
            received: list[int] = []

            async def receive() -> None:
                async for event in stream:
                    received.append(event.cursor)
                    if len(received) == SAVES:
                        return

            async def write() -> None:
                for i in range(SAVES):
                    text = f"saved across the failover, number {i} of {SAVES}"
                    await writer.service.save(
                        alice, MemoryDraft(text, Kind.EPISODIC, scope=Scope.PROJECT)
                    )
                    if i == SAVES // 4:
                        promoted = await asyncio.to_thread(sentinel.failover)
                        assert promoted == sentinel.replica.port
                    await asyncio.sleep(0.05)

            buses = [writer.realtime.bus, reader.realtime.bus]
            reconnects = [bus.reconnects for bus in buses]
            try:
                async with asyncio.timeout(60):
                    await asyncio.gather(receive(), write())
            finally:
                await stream.aclose()
            first = int(since) + 1
            assert received == list(range(first, first + SAVES)), "in order, once, none lost"
            for bus, before in zip(buses, reconnects, strict=True):
                assert bus.reconnects > before, "each bus followed the failover"
                assert bus.state == "up"


async def test_an_instance_started_after_a_failover_receives_what_the_older_ones_publish(
    sentinel: SentinelGroup, database_url: str, tenant: Tenant, embedder: Any
):
    """The former master goes on answering as a master for a while after a failover: an
    instance connected before it must move to the promoted master too, or its relay would
    publish where an instance started since never listens."""
    alice = Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip
    settings = Settings(database_url=database_url, redis_url=sentinel.url, pool_max_size=4)
    async with open_memql(settings, embedder=embedder) as writer:
        async with asyncio.timeout(20):
            while writer.realtime.relay.role != "leader":  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        await asyncio.to_thread(sentinel.failover)
        async with open_memql(settings, embedder=embedder) as reader:
            async with asyncio.timeout(20):
                while reader.realtime.bus.state != "up":  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            # from the log's cursor now: the first save reaches the stream whenever its
            # set-up ends (replayed or live), so a loaded machine's slow set-up cannot lose it
            since = await reader.service.event_cursor(alice)
            stream = reader.service.memory_events(alice, scope=Scope.PROJECT, since=since)
            try:
                for text in ("after the failover", "and live, through the promoted master"):
                    saved = await writer.service.save(
                        alice, MemoryDraft(text, Kind.EPISODIC, scope=Scope.PROJECT)
                    )
                    # the second is published after the stream is set up and delivering:
                    # it reaches the reader only through the broadcast
                    event = await asyncio.wait_for(anext(stream), 20)
                    assert event.memory_id == saved.memory.id
            finally:
                await stream.aclose()
