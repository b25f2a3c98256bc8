"""Reads on a hot standby (`MEMQL_READ_DATABASE_URL`): a caller's own writes are visible to
its next read on this instance and on any other, however far the standby lags (its replay
paused); a subscription started meanwhile misses nothing; the relay and the deliverer lead on
the primary only; a standby that dies, or does not know a new key yet, costs a read of the
primary, never an error."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
import pytest

from memql import metrics
from memql.db import events as db_events
from memql.db.replica import read_conninfo
from memql.model import Access, Consumer, Grant, Kind, Principal
from memql.requests import ContextQuery, MemoryDraft, RecallQuery
from memql.runtime import Memql, open_database, open_memql
from memql.settings import Settings
from memql.testing import Tenant, free_port, make_tenant
from memql.testing.standby import StandbyPair
from memql.webhook_delivery import DELIVERY_LOCK

REDIS = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="module")
async def pair() -> AsyncIterator[StandbyPair]:
    started = await asyncio.to_thread(StandbyPair)
    try:
        yield started
    finally:
        await asyncio.to_thread(started.stop)


@pytest.fixture(scope="module")
async def primary(pair: StandbyPair) -> AsyncIterator[str]:
    async with open_database(Settings(database_url=pair.primary_url)) as url:
        yield url


@pytest.fixture
async def tenant(primary: str) -> Tenant:
    return await make_tenant(primary)


@asynccontextmanager
async def memql_on(
    primary: str, pair: StandbyPair, embedder: Any, **settings: Any
) -> AsyncIterator[Memql]:
    config = Settings(
        database_url=primary,
        read_database_url=pair.standby_url,
        pool_min_size=1,
        pool_max_size=4,
        **settings,
    )
    async with open_memql(config, embedder=embedder) as memql:
        yield memql


@contextmanager
def paused(pair: StandbyPair) -> Iterator[None]:
    pair.pause()
    try:
        yield
    finally:
        pair.resume()


def principal_of(tenant: Tenant, user: str = "alice") -> Principal:
    return Principal(
        tenant.project_id, tenant.project_name, user, Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip


def reads(outcome: str) -> float:
    return metrics.STANDBY_READS.labels(outcome)._value.get()


async def every_read(memql: Memql, alice: Principal, text: str) -> None:
    """The saved `text` is in alice's list, her count, her recall and her context blocks."""
    service = memql.service
    page = await service.list_memories(alice)
    assert text in [m.content for m in page.memories]
    assert page.criteria is not None
    assert await service.count_memories(alice, page.criteria) == len(page.memories)
    hits = await service.recall(alice, RecallQuery(text))
    assert text in [h.memory.content for h in hits]
    assert text in (await service.context(alice)).text
    assert text in (await service.context(alice, ContextQuery(text))).text


def test_the_read_url_overrides_the_primary_and_prefers_a_standby():
    merged = read_conninfo(
        "postgresql://memql:secret@primary:5432/memql", "host=r1,r2 port=5433,5434"
    )
    params = psycopg.conninfo.conninfo_to_dict(merged)
    assert params["host"] == "r1,r2" and params["port"] == "5433,5434"
    assert params["dbname"] == "memql" and params["user"] == "memql"
    assert params["target_session_attrs"] == "prefer-standby"
    explicit = read_conninfo("dbname=memql", "host=r1 target_session_attrs=standby")
    assert psycopg.conninfo.conninfo_to_dict(explicit)["target_session_attrs"] == "standby"


async def test_reads_run_on_the_standby_and_wait_for_the_callers_own_write(
    primary: str, pair: StandbyPair, tenant: Tenant, hash_embedder: Any
):
    async with memql_on(primary, pair, hash_embedder) as memql:
        alice, bob = principal_of(tenant), principal_of(tenant, "bob")
        before = reads("standby") + reads("standby_waited")
        await memql.service.save(alice, MemoryDraft("the standby replays this", Kind.TOPICAL))
        await every_read(memql, alice, "the standby replays this")
        # bob wrote nothing: his read never waits
        await memql.service.list_memories(bob)
        # list, count, recall, context, context with a query (recall and count): 6; bob's: 1
        assert reads("standby") + reads("standby_waited") - before == 7


async def test_own_save_is_visible_on_every_read_with_the_standby_paused(
    primary: str, pair: StandbyPair, tenant: Tenant, hash_embedder: Any
):
    async with memql_on(primary, pair, hash_embedder, read_wait_seconds=0.02) as memql:
        alice = principal_of(tenant)
        await memql.service.list_memories(alice)  # the standby's pool is up
        with paused(pair):
            behind = reads("primary_behind")
            for i in range(3):
                text = f"saved while the standby is paused {i}"
                await memql.service.save(alice, MemoryDraft(text, Kind.TOPICAL))
                await every_read(memql, alice, text)
            assert reads("primary_behind") - behind == 18
            # another user of the project did not write: the standby serves them, lagging
            await memql.service.list_memories(principal_of(tenant, "bob"))
            assert reads("primary_behind") - behind == 18


async def test_a_write_on_one_instance_is_visible_to_its_next_read_on_another(
    primary: str, pair: StandbyPair, tenant: Tenant, hash_embedder: Any
):
    async with (
        memql_on(primary, pair, hash_embedder, redis_url=REDIS) as one,
        memql_on(primary, pair, hash_embedder, redis_url=REDIS) as other,
    ):
        alice = principal_of(tenant)
        await other.service.list_memories(alice)
        with paused(pair):
            await one.service.save(alice, MemoryDraft("written on one instance", Kind.TOPICAL))
            await every_read(other, alice, "written on one instance")


async def test_a_subscription_started_while_the_standby_is_paused_misses_nothing(
    primary: str, pair: StandbyPair, tenant: Tenant, hash_embedder: Any
):
    async with memql_on(primary, pair, hash_embedder) as memql:
        alice = principal_of(tenant)
        service = memql.service
        with paused(pair):
            since = await service.event_cursor(alice)
            first = await service.save(alice, MemoryDraft("before the stream", Kind.TOPICAL))
            # replay from `since` must find the save the standby has not replayed; then live
            stream = service.memory_events(alice, since=since)
            try:
                got = await asyncio.wait_for(anext(stream), 10)
                assert got.memory_id == first.memory.id
                second = await service.save(alice, MemoryDraft("during the stream", Kind.TOPICAL))
                got = await asyncio.wait_for(anext(stream), 10)
                assert got.memory_id == second.memory.id
            finally:
                await stream.aclose()


async def test_the_relay_and_the_deliverer_lead_on_the_primary_only(
    primary: str, pair: StandbyPair, hash_embedder: Any
):
    """An advisory lock is granted on a standby too (its own lock space): a leader that took
    it there would lead beside the real one. Both locks are held on the primary, none on the
    standby, and nothing of memql listens there."""
    async with memql_on(primary, pair, hash_embedder, redis_url=REDIS) as memql:
        async with asyncio.timeout(20):
            while memql.realtime.relay.role != "leader" or memql.webhooks.role != "leader":  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        wanted = {db_events.RELAY_LOCK, DELIVERY_LOCK}
        locks = (
            "select (classid::bigint << 32) | objid::bigint from pg_locks"
            " where locktype = 'advisory' and granted"
        )
        async with await psycopg.AsyncConnection.connect(primary, autocommit=True) as conn:
            held = {row[0] for row in await (await conn.execute(locks)).fetchall()}
        assert wanted <= held
        async with await psycopg.AsyncConnection.connect(
            pair.on_standby(primary), autocommit=True
        ) as conn:
            assert await (await conn.execute(locks)).fetchall() == []


async def test_reads_answer_when_the_standby_is_killed_and_when_it_is_down_at_start(
    primary: str, pair: StandbyPair, tenant: Tenant, hash_embedder: Any
):
    alice = principal_of(tenant)
    try:
        async with memql_on(primary, pair, hash_embedder) as memql:
            await memql.service.save(alice, MemoryDraft("the standby dies", Kind.TOPICAL))
            await every_read(memql, alice, "the standby dies")
            await asyncio.to_thread(pair.kill_standby)
            started = time.monotonic()
            await every_read(memql, alice, "the standby dies")
            assert time.monotonic() - started < 10
        async with memql_on(primary, pair, hash_embedder) as memql:
            await memql.service.save(alice, MemoryDraft("started without it", Kind.TOPICAL))
            await every_read(memql, alice, "started without it")
    finally:
        await asyncio.to_thread(pair.start_standby)


async def test_a_key_the_standby_has_not_replayed_reads_on_the_primary(
    primary: str, pair: StandbyPair, hash_embedder: Any
):
    async with memql_on(primary, pair, hash_embedder) as memql:
        with paused(pair):
            fresh = await make_tenant(primary)
            page = await memql.service.list_memories(principal_of(fresh))
            assert page.memories == []


async def test_with_redis_away_reads_go_to_the_primary_and_still_answer(
    primary: str, pair: StandbyPair, tenant: Tenant, hash_embedder: Any
):
    """Redis holds what other instances wrote: when it does not answer, no standby can be
    trusted with a caller's read, so it goes to the primary (never an error, never stale)."""
    away = f"redis://127.0.0.1:{free_port()}/0"
    async with memql_on(primary, pair, hash_embedder, redis_url=away) as memql:
        alice = principal_of(tenant)
        with paused(pair):
            unknown = reads("primary_unknown")
            await memql.service.save(alice, MemoryDraft("Redis is away", Kind.TOPICAL))
            await every_read(memql, alice, "Redis is away")
            assert reads("primary_unknown") - unknown == 6
