"""Two `memql serve` processes on one database and one Redis (our own): events cross instances
exactly once and in cursor order, through Redis killed (SIGKILL) and restarted, a relay leader
killed (SIGKILL), and a subscriber that disconnects and resumes with `since`. Counts written
equal counts received."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from memql.testing import (
    GraphQLClient,
    RedisProcess,
    ServeProcess,
    Tenant,
    make_tenant,
    newest_cursor,
)
from tests.operations import SAVE
from tests.ws import EventSubscription

# `memql serve` loads the real model: these tests live in its database
pytestmark = pytest.mark.model


@dataclass
class Cluster:
    redis: RedisProcess
    a: ServeProcess
    b: ServeProcess
    tenant: Tenant


@pytest.fixture(scope="module")
async def cluster(database_url: str) -> AsyncIterator[Cluster]:
    workdir = Path(tempfile.mkdtemp(prefix="memql-cluster-"))
    redis = RedisProcess(workdir)
    instances: list[ServeProcess] = []
    try:
        redis.start()
        instances = [
            ServeProcess.on_database(database_url, workdir, name, redis_url=redis.url)
            for name in ("a", "b")
        ]
        await asyncio.gather(*(i.ready() for i in instances))
        yield Cluster(redis, instances[0], instances[1], await make_tenant(database_url))
    finally:
        for instance in instances:
            instance.stop()
        redis.stop()


async def log_cursors(db, tenant: Tenant, user: str) -> list[str]:
    cur = await db.execute(
        "select cursor from memory_events where project_id = %s"
        " and (scope = 'project' or owner_id = %s) order by cursor",
        (tenant.project_id, user),
    )
    return [str(c) for (c,) in await cur.fetchall()]


async def newest_since(db, project_id) -> str:
    return str(await newest_cursor(db, project_id))


async def write(instance: ServeProcess, tenant: Tenant, user: str, texts: list[str]) -> None:
    """Save each text through `instance`, one after another, as `user`."""
    async with httpx.AsyncClient(base_url=instance.url, timeout=60) as http:
        client = GraphQLClient(http, tenant.key, user)
        for text in texts:
            await client.ok(SAVE, {"input": {"content": text, "kind": "EPISODIC"}})


def notes(tag: str, count: int) -> list[str]:
    return [f"{tag} reading {i}: {i * 7919 % 10007} units on day {i}." for i in range(count)]


async def received_after(db, tenant, user, since: str) -> list[str]:
    return [c for c in await log_cursors(db, tenant, user) if int(c) > int(since)]


async def test_a_subscriber_on_one_instance_gets_every_write_through_the_other(cluster, db):
    t = cluster.tenant
    since = await newest_since(db, cluster.tenant.project_id)
    async with EventSubscription(cluster.a.url, t.key, "alice", since=since) as sub:
        await asyncio.gather(
            write(cluster.b, t, "alice", notes("b-alice", 12)),
            write(cluster.b, t, "bob", notes("b-bob", 6)),
            write(cluster.a, t, "alice", notes("a-alice", 6)),
        )
        expected = await received_after(db, t, "alice", since)
        assert len(expected) == 18
        events = await sub.take(len(expected), within=30)
        assert await sub.quiet(0.5) == []
    assert [e["cursor"] for e in events] == expected


async def test_a_redis_restart_mid_stream_loses_nothing(cluster, db):
    t = cluster.tenant
    since = await newest_since(db, cluster.tenant.project_id)
    async with EventSubscription(cluster.a.url, t.key, "alice", since=since) as sub:
        writer = asyncio.create_task(write(cluster.b, t, "alice", notes("restart", 30)))
        first = await sub.take(5, within=30)
        cluster.redis.kill()  # SIGKILL, as in a crash
        for _ in range(50):
            if (await cluster.a.readyz())["broadcast"]["state"] == "reconnecting":
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("/readyz did not report the broadcast reconnecting")
        await asyncio.sleep(1.0)
        cluster.redis.start()
        await writer
        expected = await received_after(db, t, "alice", since)
        rest = await sub.take(len(expected) - len(first), within=60)
        assert await sub.quiet(0.5) == []
    assert len(expected) == 30
    assert [e["cursor"] for e in first + rest] == expected
    assert (await cluster.a.ready())["broadcast"]["reconnects"] >= 1


async def test_a_subscriber_that_disconnects_resumes_with_since_and_loses_nothing(cluster, db):
    t = cluster.tenant
    since = await newest_since(db, cluster.tenant.project_id)
    writer = asyncio.create_task(write(cluster.b, t, "alice", notes("resume", 20)))
    async with EventSubscription(cluster.a.url, t.key, "alice", since=since) as sub:
        before = await sub.take(6, within=30)
    # resumed on the other instance, while the writes go on
    resume_from = before[-1]["cursor"]
    async with EventSubscription(cluster.b.url, t.key, "alice", since=resume_from) as sub:
        await writer
        expected = await received_after(db, t, "alice", since)
        after = await sub.take(len(expected) - len(before), within=30)
        assert await sub.quiet(0.5) == []
    assert len(expected) == 20
    assert [e["cursor"] for e in before + after] == expected


async def test_when_the_relay_leader_is_killed_another_instance_takes_over(cluster, db):
    """Runs last in this module: it kills one of the two instances."""
    t = cluster.tenant
    states = {i.name: (await i.readyz())["relay"] for i in (cluster.a, cluster.b)}
    assert sorted(states.values()) == ["leader", "standby"], states
    leader, survivor = (cluster.a, cluster.b) if states["a"] == "leader" else (cluster.b, cluster.a)
    since = await newest_since(db, cluster.tenant.project_id)
    async with EventSubscription(survivor.url, t.key, "alice", since=since) as sub:
        writer = asyncio.create_task(write(survivor, t, "alice", notes("failover", 24)))
        first = await sub.take(5, within=30)
        leader.kill()
        await writer
        expected = await received_after(db, t, "alice", since)
        rest = await sub.take(len(expected) - len(first), within=30)
        assert await sub.quiet(0.5) == []
    assert len(expected) == 24
    assert [e["cursor"] for e in first + rest] == expected
    assert (await survivor.readyz())["relay"] == "leader"
