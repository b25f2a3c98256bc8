"""Query vectors are kept per instance: a question asked again skips the model, within one
project, among the last N asked, for the model that embedded them; `/metrics` counts hits and
misses. The stand-in embedder is counted, not replaced: its vectors are what the recall ranks."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from prometheus_client import generate_latest

from memql import metrics
from memql.db import memories as db_memories
from memql.db.pool import owner_connection
from memql.embeddings import Vector
from memql.model import Access, Consumer, Grant, Kind, Principal
from memql.requests import ContextQuery, MemoryDraft, RecallQuery
from memql.runtime import open_memql
from memql.service import MemoryService
from memql.service import memories as service_memories
from memql.service.query_vectors import QueryVectors
from memql.settings import Settings
from memql.testing import HashEmbedder, make_tenant


class Counted(HashEmbedder):
    """The stand-in, counting the texts it is asked to embed; `gate` holds it when set."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []
        self.gate: asyncio.Event | None = None
        self.failing = False

    async def embed(self, texts: list[str]) -> list[Vector]:
        self.asked += texts
        if self.gate is not None:
            await self.gate.wait()
        if self.failing:
            raise RuntimeError("the model is away")
        return await super().embed(texts)


@asynccontextmanager
async def service_with(
    database_url: str, embedder: Counted, **options
) -> AsyncIterator[MemoryService]:
    settings = Settings(database_url=database_url, pool_min_size=1, pool_max_size=2, **options)
    async with open_memql(settings, embedder=embedder) as memql:
        yield memql.service


def principal_of(tenant, user: str = "alice") -> Principal:
    return Principal(
        tenant.project_id, tenant.project_name, user, Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip


def counter(result: str) -> float:
    return metrics.REGISTRY.get_sample_value("memql_query_vectors_total", {"result": result}) or 0.0


async def test_a_question_asked_again_is_not_embedded_again_and_finds_the_same(
    database_url: str, tenant
):
    embedder = Counted()
    async with service_with(database_url, embedder) as service:
        alice = principal_of(tenant)
        await service.save(
            alice, MemoryDraft("alice takes the night train to vienna", Kind.TOPICAL)
        )
        embedder.asked.clear()
        hits0, misses0 = counter("hit"), counter("miss")
        first = await service.recall(alice, RecallQuery("night train"))
        again = await service.recall(alice, RecallQuery("night train"))
        # another user of the project, and the context block, ask the same text
        await service.recall(principal_of(tenant, "bob"), RecallQuery("night train"))
        await service.context(alice, ContextQuery("night train"))
    assert embedder.asked == ["night train"]
    assert [h.memory.id for h in again] == [h.memory.id for h in first] != []
    assert (counter("hit") - hits0, counter("miss") - misses0) == (3, 1)
    exposed = generate_latest(metrics.REGISTRY).decode()
    assert 'memql_query_vectors_total{result="hit"}' in exposed
    assert "memql_query_vectors_kept" in exposed


async def test_projects_do_not_share_query_vectors(database_url: str, tenant):
    """A hit is faster than a miss by a whole embedding: shared across projects, it would let
    one tenant time whether another asked a question."""
    embedder = Counted()
    other = await make_tenant(database_url)
    async with service_with(database_url, embedder) as service:
        await service.recall(principal_of(tenant), RecallQuery("the vienna plan"))
        await service.recall(principal_of(other), RecallQuery("the vienna plan"))
    assert embedder.asked == ["the vienna plan", "the vienna plan"]


async def test_the_cache_is_bounded_and_forgets_the_least_recently_asked(database_url: str, tenant):
    embedder = Counted()
    async with service_with(database_url, embedder, query_vectors=2) as service:
        alice = principal_of(tenant)
        for text in ("one", "two", "one", "three", "one", "two"):
            await service.recall(alice, RecallQuery(text))
        assert len(service.query_vectors) == 2
    # "one" stayed (asked again each time), "two" went when "three" came
    assert embedder.asked == ["one", "two", "three", "two"]


async def test_zero_entries_embeds_every_query(database_url: str, tenant):
    embedder = Counted()
    async with service_with(database_url, embedder, query_vectors=0) as service:
        for _ in range(2):
            await service.recall(principal_of(tenant), RecallQuery("same words"))
        assert len(service.query_vectors) == 0
    assert embedder.asked == ["same words", "same words"]


async def test_nothing_kept_is_served_for_another_model():
    embedder = Counted()
    cache = QueryVectors(embedder, entries=8)
    project = uuid.uuid4()
    first = await cache.vector(project, "the same text")
    embedder.model = "another/model"
    second = await cache.vector(project, "the same text")
    assert embedder.asked == ["the same text", "the same text"]
    assert len(cache) == 1, "the old model's entries were emptied"
    assert first is not second


async def test_concurrent_asks_share_one_embedding_and_one_cancelled_waiter_spares_the_rest(
    database_url: str, tenant
):
    embedder = Counted()
    embedder.gate = asyncio.Event()
    async with service_with(database_url, embedder) as service:
        alice = principal_of(tenant)
        gone = asyncio.create_task(service.recall(alice, RecallQuery("shared question")))
        staying = asyncio.create_task(service.recall(alice, RecallQuery("shared question")))
        await asyncio.sleep(0.05)
        gone.cancel()
        embedder.gate.set()
        assert await asyncio.wait_for(staying, 5) == []
        with pytest.raises(asyncio.CancelledError):
            await gone
    assert embedder.asked == ["shared question"]


async def test_a_failed_embedding_is_not_kept(database_url: str, tenant):
    embedder = Counted()
    embedder.failing = True
    async with service_with(database_url, embedder) as service:
        alice = principal_of(tenant)
        with pytest.raises(RuntimeError):
            await service.recall(alice, RecallQuery("while the model is away"))
        embedder.failing = False
        assert await service.recall(alice, RecallQuery("while the model is away")) == []
    assert embedder.asked == ["while the model is away"] * 2


async def test_a_context_block_counts_its_memories_while_the_model_embeds_its_query(
    database_url: str, read_database_url: str, tenant, monkeypatch: pytest.MonkeyPatch
):
    """The block's live count needs no vector: it is read while the query embeds, not after
    the recall (one round trip less after the model), and where reads go (the standby, with
    `--reads-on-standby`)."""
    counted: list[tuple[tuple[str, int], int]] = []  # (the server, the count) of each read
    count = db_memories.count_matching

    async def count_matching(conn, principal, criteria):
        found = await count(conn, principal, criteria)
        counted.append(((conn.info.host, conn.info.port), found))
        return found

    monkeypatch.setattr(service_memories.db_memories, "count_matching", count_matching)
    embedder = Counted()
    embedder.gate = asyncio.Event()
    async with service_with(database_url, embedder) as service:
        block = asyncio.create_task(service.context(principal_of(tenant), ContextQuery("the plan")))
        try:
            for _ in range(100):
                if counted:
                    break
                await asyncio.sleep(0.05)
            assert embedder.asked == ["the plan"] and not block.done()
            assert counted, "the count waited for the embedding"
        finally:
            embedder.gate.set()
        assert (await asyncio.wait_for(block, 5)).count == 0
    async with await owner_connection(read_database_url) as reads:
        assert counted == [((reads.info.host, reads.info.port), 0)]
