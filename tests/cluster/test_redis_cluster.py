"""Redis Cluster (`REDIS_URL=redis+cluster://...`): the broadcast rides sharded pub/sub
(`SPUBLISH`/`SSUBSCRIBE`), so a project's events travel only through the node owning its
channel's slot. A slot moving or a master dying while subscribed costs a resubscription and a
replay from the event log: the subscriber misses nothing and gets nothing twice."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memql.model import Access, Consumer, EventType, Grant, Kind, MemoryEvent, Principal, Scope
from memql.realtime import wire
from memql.realtime.bus import EventBus
from memql.redis_client import cluster_nodes
from memql.requests import MemoryDraft
from memql.runtime import Memql, open_memql
from memql.settings import Settings
from memql.testing import Tenant
from memql.testing.redis_cluster import RedisClusterGroup

SAVES = 40


def test_a_cluster_url_names_its_seed_nodes():
    assert cluster_nodes("redis+cluster://:pw@n1:7000,n2/") == [("n1", 7000), ("n2", 6379)]
    assert cluster_nodes("rediss+cluster://n1:7000/0") == [("n1", 7000)]
    with pytest.raises(ValueError, match="database 0"):
        cluster_nodes("redis+cluster://n1:7000/2")


async def _group(replicas: int) -> AsyncIterator[RedisClusterGroup]:
    workdir = Path(tempfile.mkdtemp(prefix="memql-redis-cluster-"))
    group = await asyncio.to_thread(RedisClusterGroup, workdir, 3, replicas)
    try:
        yield group
    finally:
        await asyncio.to_thread(group.stop)


@pytest.fixture
async def cluster() -> AsyncIterator[RedisClusterGroup]:
    async for group in _group(replicas=0):
        yield group


@pytest.fixture
async def replicated_cluster() -> AsyncIterator[RedisClusterGroup]:
    async for group in _group(replicas=1):
        yield group


def _alice(tenant: Tenant) -> Principal:
    return Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip


async def _instances(
    stack: AsyncExitStack, url: str, database_url: str, embedder: Any
) -> tuple[Memql, Memql]:
    """Two memql instances on the cluster: the first leads the relay."""
    settings = Settings(database_url=database_url, redis_url=url, pool_max_size=4)
    writer = await stack.enter_async_context(open_memql(settings, embedder=embedder))
    async with asyncio.timeout(20):
        while writer.realtime.relay.role != "leader":  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    reader = await stack.enter_async_context(open_memql(settings, embedder=embedder))
    async with asyncio.timeout(20):
        while reader.realtime.bus.state != "up":  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return writer, reader


async def _save_and_receive(
    writer: Memql,
    readers: list[Memql],
    alice: Principal,
    during: Callable[[], Awaitable[None]] | None = None,
) -> list[list[int]]:
    """SAVES saves through `writer`, `during()` run after a quarter of them; what a project
    stream on each of `readers` received, by cursor."""
    since = await writer.service.event_cursor(alice)
    streams = [r.service.memory_events(alice, scope=Scope.PROJECT, since=since) for r in readers]
    received: list[list[int]] = [[] for _ in readers]

    async def receive(n: int) -> None:
        async for event in streams[n]:
            received[n].append(event.cursor)
            if len(received[n]) == SAVES:
                return

    async def write() -> None:
        for i in range(SAVES):
            text = f"saved through the cluster, number {i} of {SAVES}"
            await writer.service.save(alice, MemoryDraft(text, Kind.EPISODIC, scope=Scope.PROJECT))
            if i == SAVES // 4 and during is not None:
                await during()
            await asyncio.sleep(0.05)

    try:
        async with asyncio.timeout(90):
            await asyncio.gather(write(), *(receive(n) for n in range(len(readers))))
    finally:
        for stream in streams:
            await stream.aclose()
    first = int(since) + 1
    for got in received:
        assert got == list(range(first, first + SAVES)), "in order, once, none lost"
    return received


async def test_events_fan_out_to_both_instances_through_the_node_of_their_slot_only(
    cluster: RedisClusterGroup, database_url: str, tenant: Tenant, embedder: Any
):
    alice = _alice(tenant)
    channel = wire.channel(tenant.project_id)
    owner = cluster.owner(cluster.keyslot(channel))
    async with AsyncExitStack() as stack:
        writer, reader = await _instances(stack, cluster.url, database_url, embedder)

        async def subscribed_where() -> None:
            # sharded: the channel is known on its slot's node only, and not as a classic one
            for node in cluster.masters:
                shard = cluster.cli(node.port, "pubsub", "shardchannels", channel).split()
                assert (channel in shard) == (node.port == owner), node.port
                assert channel not in cluster.cli(node.port, "pubsub", "channels", "*").split()

        await _save_and_receive(writer, [writer, reader], alice, during=subscribed_where)


async def test_a_slot_moved_while_subscribed_loses_nothing_and_repeats_nothing(
    cluster: RedisClusterGroup, database_url: str, tenant: Tenant, embedder: Any
):
    alice = _alice(tenant)
    slot = cluster.keyslot(wire.channel(tenant.project_id))
    source = cluster.owner(slot)
    target = next(m.port for m in cluster.masters if m.port != source)
    async with AsyncExitStack() as stack:
        writer, reader = await _instances(stack, cluster.url, database_url, embedder)
        buses = [writer.realtime.bus, reader.realtime.bus]
        before: list[int] = []

        async def move() -> None:
            before.extend(bus.resubscribes + bus.reconnects for bus in buses)
            await asyncio.to_thread(cluster.move_slot, slot, target)

        await _save_and_receive(writer, [writer, reader], alice, during=move)
        assert cluster.owner(slot) == target
        for bus, noticed in zip(buses, before, strict=True):
            # the channel was subscribed again (alone, or with the rest if a late heartbeat
            # on a loaded machine reconnected the bus meanwhile: test_a_slot_moved_costs_...)
            assert bus.resubscribes + bus.reconnects > noticed
            assert bus.state == "up"


def _event(cursor: int, project: uuid.UUID) -> MemoryEvent:
    return MemoryEvent(
        cursor=cursor, project_id=project, scope=Scope.PROJECT, owner_id="", actor_id="alice",
        type=EventType.CREATED, memory_id=uuid.uuid4(), changed_at=datetime.now(UTC), memory=None,
    )  # fmt: skip


async def test_a_slot_moved_costs_one_channel_a_resubscription_and_its_inboxes_a_resync(
    cluster: RedisClusterGroup,
):
    """A moved slot touches the channels hashed to it only: the bus subscribes that one again
    and sends its inboxes (only) to the event log; the rest keep listening undisturbed."""
    moved_project, other_project = uuid.uuid4(), uuid.uuid4()
    moved, other = wire.channel(moved_project), wire.channel(other_project)
    slot = cluster.keyslot(moved)
    source = cluster.owner(slot)
    target = next(m.port for m in cluster.masters if m.port != source)
    # the heartbeat allows for a loaded machine here: the point is the one channel's recovery
    bus = EventBus(cluster.url, heartbeat_timeout=10.0)
    await bus.start()
    try:
        route = wire.route(Scope.PROJECT, "")
        async with (
            bus.inbox([(moved, route)], 100) as boxed,
            bus.inbox([(other, route)], 100) as kept,
        ):
            async with asyncio.timeout(20):
                # the first connection, as every one, sends the inboxes to the event log
                while not (bus.state == "up" and boxed.resync and kept.resync):  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            boxed.resync = kept.resync = False
            await asyncio.to_thread(cluster.move_slot, slot, target)
            async with asyncio.timeout(20):
                while not boxed.resync:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            assert bus.resubscribes == 1 and bus.reconnects == 0
            assert not kept.resync
            # subscribed where the slot now is: a message published now arrives
            await bus.publish(moved, wire.encode(_event(1, moved_project), 0))
            async with asyncio.timeout(10):
                while not len(boxed):
                    await boxed.wait(0.1)
            assert [e.cursor for e in boxed.take()] == [1]
            shard = cluster.cli(target, "pubsub", "shardchannels", moved).split()
            assert moved in shard
    finally:
        await bus.stop()


async def test_a_master_killed_while_subscribed_is_replaced_by_its_replica_and_nothing_is_lost(
    replicated_cluster: RedisClusterGroup, database_url: str, tenant: Tenant, embedder: Any
):
    cluster = replicated_cluster
    alice = _alice(tenant)
    slot = cluster.keyslot(wire.channel(tenant.project_id))
    dead = cluster.owner(slot)
    async with AsyncExitStack() as stack:
        writer, reader = await _instances(stack, cluster.url, database_url, embedder)

        async def kill() -> None:
            await asyncio.to_thread(cluster.kill, dead)

        await _save_and_receive(writer, [writer, reader], alice, during=kill)
        assert cluster.owner(slot) != dead, "a replica took the slot over"
        for bus in (writer.realtime.bus, reader.realtime.bus):
            assert bus.reconnects >= 1
            assert bus.state == "up"


async def test_a_write_position_kept_for_own_write_reads_is_shared_through_its_slot_node(
    cluster: RedisClusterGroup, tenant: Tenant
):
    """Reads on replicas wait for a principal's last write, wherever it was made: the
    position one instance records, another reads, through the node of the key's slot."""
    from memql.db.replica import SharedPositions

    alice = _alice(tenant)
    here, there = SharedPositions(cluster.url), SharedPositions(cluster.url)
    try:
        await here.record(alice, 0x2A0)
        await here.record(alice, 0x100)  # an older position never replaces a newer one
        assert await there.last(alice) == 0x2A0
        key = f"memql:written:{tenant.project_id}:{alice.user_id}"
        owner = cluster.owner(cluster.keyslot(key))
        assert cluster.cli(owner, "get", key) == f"{0x2A0:016x}"
    finally:
        await here.close()
        await there.close()
