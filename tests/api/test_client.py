"""The Python client (`from memql import Client, AsyncClient`) against a live server."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from memql import AsyncClient, Client, MemoryInput
from memql.client import (
    BadUserInput,
    Conflict,
    MemoryEvent,
    NotFound,
    Unauthenticated,
)
from memql.model import SaveOutcome, Scope
from tests.proxy import Gate


async def test_the_async_client_pages_through_lists_and_retires_restores_and_erases(server, tenant):
    async with AsyncClient(server, api_key=tenant.key, user_id="carol") as m:
        results = await m.save_many(
            [MemoryInput(f"Visited city number {i} in 2026.", "episodic") for i in range(5)]
        )
        assert [r.outcome for r in results] == [SaveOutcome.CREATED] * 5

        page = await m.memories(first=2)
        assert len(page.memories) == 2 and page.has_next_page and page.end_cursor
        every = [memory async for memory in m.iter_memories(first=2, kinds=["episodic"])]
        assert {x.id for x in every} == {r.memory.id for r in results}

        retired = await m.retire(results[0].memory.id)
        assert retired.invalidation_reason == "retired"
        assert len([x async for x in m.iter_memories()]) == 4
        restored = await m.restore(retired.id)
        assert restored.invalidated_at is None

        assert await m.erase(results[1].memory.id) == 1
        assert await m.memory(results[1].memory.id) is None
        assert await m.erase_user_memories() == 4
        assert (await m.memories()).memories == ()


async def test_errors_are_typed_exceptions_carrying_the_code(server, tenant):
    async with AsyncClient(server, api_key=tenant.key, user_id="dave") as m:
        with pytest.raises(BadUserInput) as bad:
            await m.save("   ", "topical")
        assert bad.value.code == "BAD_USER_INPUT" and "content" in bad.value.message
        with pytest.raises(NotFound):
            await m.retire("00000000-0000-0000-0000-000000000000")
        live = await m.save("Works from Lisbon.", "topical")
        with pytest.raises(Conflict):
            await m.restore(live.memory.id)
    async with AsyncClient(server, api_key="mq_not-a-key", user_id="dave") as stranger:
        with pytest.raises(Unauthenticated) as refused:
            await stranger.recall("anything")
        assert refused.value.code == "UNAUTHENTICATED"
    with pytest.raises(ValueError):
        AsyncClient(server, api_key=tenant.key)  # a key acts for a user: it needs one


async def test_the_sync_client_works_the_same_from_a_thread(server, tenant):
    def session() -> tuple[SaveOutcome, list[str], str]:
        with Client(server, api_key=tenant.key, user_id="erin") as m:
            saved = m.save("Allergic to peanuts.", "topical", scope="user", pinned=True)
            hits = m.recall("food allergies", scope=Scope.USER)
            return saved.outcome, [h.memory.content for h in hits], m.context().text

    outcome, contents, text = await asyncio.to_thread(session)
    assert outcome is SaveOutcome.CREATED
    assert contents == ["Allergic to peanuts."]
    assert text.splitlines()[-1] == "- [pinned · general · topical] Allergic to peanuts."


async def test_a_cut_event_stream_resumes_from_its_last_cursor_without_gap_or_duplicate(
    server, tenant
):
    gate = Gate(server)
    await gate.open()
    arrivals: asyncio.Queue[MemoryEvent] = asyncio.Queue()
    async with AsyncClient(server, api_key=tenant.key, user_id="frank") as writer:
        listener = AsyncClient(gate.url, api_key=tenant.key, user_id="frank")

        async def listen() -> None:
            async for event in listener.events():
                arrivals.put_nowait(event)

        task = asyncio.create_task(listen())
        try:
            # the stream starts with the next event: save until one arrives
            async with asyncio.timeout(20):
                while arrivals.empty():
                    await writer.save(f"Warm-up note {arrivals.qsize()}.", "episodic")
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.3):
                            arrivals.put_nowait(await arrivals.get())
            await asyncio.sleep(0.5)
            received = [arrivals.get_nowait() for _ in range(arrivals.qsize())]
            await gate.cut()
            missed = [
                (await writer.save(f"Read chapter {i} of the novel.", "episodic")).memory.id
                for i in range(3)
            ]
            await gate.open()
            after = (await writer.save("Finished the novel.", "episodic")).memory.id
            tail = [await asyncio.wait_for(arrivals.get(), 30) for _ in range(4)]
            await asyncio.sleep(0.5)  # nothing more may come
            assert arrivals.empty()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await listener.close()
            await gate.cut()

    assert [e.memory_id for e in tail] == [*missed, after]
    cursors = [int(e.cursor) for e in [*received, *tail]]
    assert cursors == sorted(set(cursors))
    assert all(e.type == "memory.created" for e in tail)


async def test_the_client_pages_both_ways_in_either_order_with_filters_and_counts(server, tenant):
    async with AsyncClient(server, api_key=tenant.key, user_id="gina") as m:
        saved = [
            (
                await m.save(
                    f"Booked flight number {i} for the spring trip.",
                    "episodic",
                    source={"tool": "travel" if i % 2 else "mail"},
                )
            ).memory
            for i in range(5)
        ]
        newest_first = [x.id for x in reversed(saved)]
        first = await m.memories(first=2, total_count=True)
        assert [x.id for x in first.memories] == newest_first[:2]
        assert first.total_count == 5 and first.has_next_page and not first.has_previous_page
        back = await m.memories(last=2, before=first.end_cursor)
        assert [x.id for x in back.memories] == newest_first[:1]
        oldest_first = await m.memories(order_by="created_at", direction="asc", first=5)
        assert [x.id for x in oldest_first.memories] == [x.id for x in saved]
        travel = await m.memories(source={"tool": "travel"}, total_count=True)
        assert travel.total_count == 2
        assert {x.id for x in travel.memories} == {saved[1].id, saved[3].id}
        later = await m.memories(created_after=saved[2].created_at)
        assert {x.id for x in later.memories} == {x.id for x in saved[2:]}
        assert await m.recall("quantum chromodynamics lecture notes", min_score=0.5) == []
