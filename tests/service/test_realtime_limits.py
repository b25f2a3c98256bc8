"""A stream's limits, on the real service, database and in-memory broadcast: a subscriber too
far behind is closed with the cursor to resume from; a withdrawn grant ends the stream."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import pytest

from memql import metrics
from memql.access.authenticate import Authenticator, policy_from
from memql.db import events as db_events
from memql.db.pool import system_connection
from memql.db.session import Sessions
from memql.errors import Forbidden, MemqlError, SubscriberBehind, Unauthenticated
from memql.model import Access, Consumer, Grant, Kind, Principal, Scope
from memql.realtime.recheck import Recheck
from memql.requests import MemoryDraft
from memql.runtime import open_memql
from memql.service import MemoryService
from memql.settings import Settings
from memql.testing import newest_cursor
from memql.testing.database import log_event


@asynccontextmanager
async def service_with(database_url, embedder, **limits) -> AsyncIterator[MemoryService]:
    settings = Settings(
        database_url=database_url, **{"pool_min_size": 1, "pool_max_size": 4, **limits}
    )
    async with open_memql(settings, embedder=embedder) as memql:
        yield memql.service


def principal_of(tenant, user: str) -> Principal:
    return Principal(
        project_id=tenant.project_id,
        project_name=tenant.project_name,
        user_id=user,
        consumer=Consumer.AGENT,
        grant=Grant(user=Access.READ_WRITE, project=Access.READ_WRITE),
    )


async def newest_since(db, project_id) -> str:
    return str(await newest_cursor(db, project_id))


def closed_behind() -> float:
    value = metrics.REGISTRY.get_sample_value(
        "memql_realtime_streams_closed_total", {"code": "SUBSCRIBER_BEHIND"}
    )
    return value or 0.0


def note(i: int) -> MemoryDraft:
    return MemoryDraft(content=f"Reading {i}: {uuid.uuid4()}", kind=Kind.EPISODIC)


async def test_a_subscriber_too_far_behind_is_closed_with_the_cursor_to_resume_from(
    database_url, embedder, tenant, db
):
    closed_before = closed_behind()
    async with service_with(database_url, embedder, subscriber_queue=3) as service:
        alice = principal_of(tenant, "alice")
        slow = service.memory_events(alice, since=await newest_since(db, tenant.project_id))
        fast = service.memory_events(alice, since=await newest_since(db, tenant.project_id))
        await service.save(alice, note(0))
        first = await anext(slow)
        await anext(fast)

        async def keep_up() -> list[int]:
            return [(await anext(fast)).cursor for _ in range(10)]

        reader = asyncio.create_task(keep_up())
        for i in range(1, 11):
            await service.save(alice, note(i))
        # once the fast one has all ten, the relay has put them in the slow one's inbox too
        assert len(await asyncio.wait_for(reader, 10)) == 10

        with pytest.raises(SubscriberBehind) as behind:
            await anext(slow)
        assert behind.value.extensions["since"] == str(first.cursor)
        await fast.aclose()
    assert closed_behind() == closed_before + 1


async def test_a_grant_withdrawn_while_streaming_ends_the_stream(database_url, embedder, tenant):
    async with service_with(database_url, embedder, auth_recheck_seconds=0.2) as service:
        alice = principal_of(tenant, "alice")
        grant = alice.grant

        async def check_many(credentials) -> list[Principal | MemqlError]:
            return [replace(alice, grant=grant) for _ in credentials]

        async def epoch() -> int:
            return 0

        stream = service.memory_events(alice, recheck=Recheck(check_many, {}, epoch))
        waiting = asyncio.create_task(anext(stream))
        await asyncio.sleep(0.5)
        assert not waiting.done(), "the stream ended while the grant still allowed it"
        grant = Grant(user=Access.NONE, project=Access.READ)
        with pytest.raises(Forbidden) as ended:
            await asyncio.wait_for(waiting, 5)
        assert ended.value.extensions["reason"] == "grant-withdrawn"


async def test_subscribing_to_a_scope_the_grant_cannot_read_is_forbidden(
    database_url, embedder, tenant
):
    async with service_with(database_url, embedder) as service:
        reader = replace(
            principal_of(tenant, "alice"), grant=Grant(user=Access.READ, project=Access.NONE)
        )

        with pytest.raises(Forbidden):
            service.memory_events(reader, scope=Scope.PROJECT)


async def test_an_event_that_arrives_before_the_revocations_notification_is_not_delivered(
    database_url, embedder, tenant, db
):
    """The race a notification alone leaves open: the key is revoked, an event commits after
    it, and the event reaches the stream before the notification about the key has been
    heard. Here the notification is never heard (the stream has no `on_change`) and the
    periodic check is a minute away; the event still carries the credential epoch the relay
    read it at, which counts the revocation: the stream sees its credentials unconfirmed
    there, checks them, and ends."""
    settings = Settings(database_url=database_url, pool_min_size=1, auth_recheck_seconds=60)
    async with open_memql(settings, embedder=embedder) as memql:
        authenticator = memql.authenticator
        credentials = [("Authorization", f"Bearer {tenant.key}"), ("X-User-Id", "alice")]
        alice = await authenticator.authenticate(credentials)
        recheck = Recheck(
            authenticator.authenticate_many, credentials, authenticator.credential_epoch
        )
        since = await newest_since(db, tenant.project_id)
        stream = memql.service.memory_events(alice, since=since, recheck=recheck)
        try:
            first, _ = await log_event(database_url, tenant.project_id)
            assert (await asyncio.wait_for(anext(stream), 10)).cursor == first
            await db.execute(
                "update api_keys set revoked_at = now() where project_id = %s",
                (tenant.project_id,),
            )
            after, _ = await log_event(database_url, tenant.project_id)
            with pytest.raises(Unauthenticated):
                event = await asyncio.wait_for(anext(stream), 10)
                raise AssertionError(f"event {event.cursor} of {after} was delivered")
        finally:
            await stream.aclose()


async def test_a_stream_confirmed_at_the_current_epoch_delivers_without_reading_it(
    database_url, embedder, tenant, db
):
    """The epoch comes with each event (read in the relay's snapshot): while no credential
    changes, twenty deliveries cost no read of the epoch beyond the stream's first check."""
    settings = Settings(database_url=database_url, pool_min_size=1, auth_recheck_seconds=60)
    async with open_memql(settings, embedder=embedder) as memql:
        authenticator = memql.authenticator
        credentials = [("Authorization", f"Bearer {tenant.key}"), ("X-User-Id", "alice")]
        alice = await authenticator.authenticate(credentials)
        reads = 0

        async def counted_epoch() -> int:
            nonlocal reads
            reads += 1
            return await authenticator.credential_epoch()

        recheck = Recheck(authenticator.authenticate_many, credentials, counted_epoch)
        since = await newest_since(db, tenant.project_id)
        stream = memql.service.memory_events(alice, since=since, recheck=recheck)
        try:
            for _ in range(20):
                cursor, _ = await log_event(database_url, tenant.project_id)
                assert (await asyncio.wait_for(anext(stream), 10)).cursor == cursor
        finally:
            await stream.aclose()
    assert reads <= 2, f"{reads} reads of the credential epoch for 20 deliveries"


async def test_many_streams_of_one_project_starting_at_once_queue_instead_of_failing(
    database_url, embedder, tenant
):
    """300 streams of one project start together on a pool of two connections (the project's
    share: one) whose wait is a quarter of a second: their reads of the log wait their turn,
    none fails for want of a connection, and every one gets the next event."""
    async with service_with(
        database_url, embedder, pool_max_size=2, pool_timeout_seconds=0.25
    ) as service:
        streams = [
            service.memory_events(principal_of(tenant, f"user-{i}"), scope=Scope.PROJECT)
            for i in range(300)
        ]
        live_before = metrics.SUBSCRIPTIONS._value.get()
        firsts = [asyncio.create_task(anext(s)) for s in streams]
        try:
            async with asyncio.timeout(30):
                while metrics.SUBSCRIPTIONS._value.get() < live_before + 300:
                    failed = [t.exception() for t in firsts if t.done()]
                    assert not failed, f"{len(failed)} streams failed to start: {failed[0]!r}"
                    await asyncio.sleep(0.05)
            cursor, _ = await log_event(database_url, tenant.project_id)
            got = await asyncio.wait_for(asyncio.gather(*firsts), 30)
            assert {e.cursor for e in got} == {cursor}
        finally:
            for t in firsts:
                t.cancel()
            await asyncio.gather(*firsts, return_exceptions=True)
            for s in streams:
                await s.aclose()


async def test_a_consumer_changed_before_its_notification_is_heard_ends_the_stream(
    database_url, embedder, tenant, db
):
    """The same race for a narrowed grant: the key is made a client key (whose grant reads no
    project scope), an event commits after it, and the credential cache has not yet heard of
    the change (its listener is not running, its entries still trusted). The check the event
    calls for must not confirm the key's old consumer from the cache."""
    settings = Settings(
        database_url=database_url,
        pool_min_size=1,
        auth_recheck_seconds=60,
        client_grant=Grant(user=Access.READ_WRITE, project=Access.NONE),
    )
    async with open_memql(settings, embedder=embedder) as memql:
        authenticator = Authenticator(memql.pool, policy_from(settings))
        authenticator.cache.listening = True  # as if its listener had not heard anything yet
        credentials = [("Authorization", f"Bearer {tenant.key}"), ("X-User-Id", "alice")]
        alice = await authenticator.authenticate(credentials)
        recheck = Recheck(
            authenticator.authenticate_many, credentials, authenticator.credential_epoch
        )
        since = await newest_since(db, tenant.project_id)
        stream = memql.service.memory_events(
            alice, scope=Scope.PROJECT, since=since, recheck=recheck
        )
        try:
            first, _ = await log_event(database_url, tenant.project_id)
            assert (await asyncio.wait_for(anext(stream), 10)).cursor == first
            await db.execute(
                "update api_keys set consumer = 'client' where project_id = %s",
                (tenant.project_id,),
            )
            after, _ = await log_event(database_url, tenant.project_id)
            with pytest.raises(Forbidden):
                event = await asyncio.wait_for(anext(stream), 10)
                raise AssertionError(f"event {event.cursor} of {after} was delivered")
        finally:
            await stream.aclose()


async def test_events_are_read_with_an_epoch_that_counts_every_change_committed_before_them(
    database_url, embedder, tenant, db
):
    """The relay's read and a replayed page carry the credential epoch of their own snapshot:
    a credential change that committed before the event is counted in it."""
    settings = Settings(database_url=database_url, pool_min_size=1)
    async with open_memql(settings, embedder=embedder) as memql:
        before = await memql.authenticator.credential_epoch()
        await db.execute(
            "update api_keys set consumer = consumer where project_id = %s", (tenant.project_id,)
        )
        cursor, _ = await log_event(database_url, tenant.project_id)
        async with await system_connection(database_url, autocommit=True) as conn:
            # every other project where it stands: only this event is left to read
            positions = {**await db_events.counters(conn), tenant.project_id: cursor - 1}
            relayed = await db_events.read_committed(conn, positions, 10)
        assert [e.cursor for e in relayed.events] == [cursor]
        assert relayed.epoch is not None and relayed.epoch > before

        alice = principal_of(tenant, "alice")
        async with Sessions(memql.pool).read(alice) as conn:
            page = await db_events.replay(conn, alice, [Scope.PROJECT], cursor - 1, cursor, 10)
        assert [e.cursor for e in page.events] == [cursor]
        assert page.epoch == relayed.epoch
