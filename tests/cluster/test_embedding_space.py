"""Embedding spaces: the database records its model; a server with another one refuses to start;
`memql reembed` moves every memory (resumably, while a server keeps writing); recall then works
in the new space."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from memql.embeddings import create_embedder
from memql.embeddings.local import LocalEmbedder
from memql.errors import ConfigurationError
from memql.runtime import open_memql
from memql.settings import Settings
from memql.testing import GraphQLClient, fresh_database, make_tenant, serving
from tests.embedding_server import Behaviour, embedding_server
from tests.operations import RECALL, SAVE_MANY

pytestmark = pytest.mark.model

NEW_MODEL = "test/projected-256"


@pytest.fixture
async def fresh_url(database_url: str) -> AsyncIterator[str]:
    """A database of its own in the embedded server: these tests change its embedding space."""
    async with fresh_database(database_url) as url:
        yield url


def tei_settings(url: str, base: str, **extra: Any) -> Settings:
    return Settings(
        database_url=url,
        embedder="tei",
        embeddings_url=base,
        embeddings_model=NEW_MODEL,
        pool_min_size=1,
        pool_max_size=4,
        **extra,
    )


async def reembed_process(url: str, base: str, *extra: str) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "MEMQL_EMBEDDER": "tei",
        "MEMQL_EMBEDDINGS_URL": base,
        "MEMQL_EMBEDDINGS_MODEL": NEW_MODEL,
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memql.cli",
        "reembed",
        *extra,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def space_of(url: str) -> tuple[str, int]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("select model, dimensions from embedding_space")
        row = await cur.fetchone()
    assert row is not None
    return row[0], row[1]


async def models_of(url: str) -> dict[tuple[str, int], int]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "select embedding_model, vector_dims(embedding), count(*) from memories group by 1, 2"
        )
        return {(m, d): n for m, d, n in await cur.fetchall()}


async def shadowed(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "select count(*) from memories where next_embedding_model = %s", (NEW_MODEL,)
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def test_another_embedder_without_reembed_refuses_to_start_and_says_what_to_do(
    fresh_url: str, embedder: LocalEmbedder
):
    async with open_memql(Settings(database_url=fresh_url, pool_min_size=1), embedder=embedder):
        pass  # records the local model's space
    async with embedding_server(embedder, Behaviour(project_to=256)) as (base, _):
        with pytest.raises(ConfigurationError) as refused:
            async with open_memql(tei_settings(fresh_url, base)):
                pass
    message = str(refused.value)
    assert "all-MiniLM-L6-v2 (384 dimensions)" in message
    assert f"{NEW_MODEL} (256 dimensions)" in message
    assert "memql reembed" in message
    assert await space_of(fresh_url) == ("sentence-transformers/all-MiniLM-L6-v2", 384)


async def test_a_killed_reembed_resumes_and_recall_then_works_in_the_new_space(
    fresh_url: str, embedder: LocalEmbedder
):
    tenant = await make_tenant(fresh_url)
    old = Settings(database_url=fresh_url, pool_min_size=1, pool_max_size=4)
    facts = [f"Project note {i}: the build server number {i} runs nightly." for i in range(40)]
    facts[17] = "Prefers concise status updates."
    async with (
        serving(old, embedder) as base_old,
        httpx.AsyncClient(base_url=base_old, timeout=60) as http,
    ):
        alice = GraphQLClient(http, tenant.key, "alice")
        await alice.ok(SAVE_MANY, {"inputs": [{"content": c, "kind": "TOPICAL"} for c in facts]})
        # a slow embedding service, so the first run can be killed halfway
        async with embedding_server(embedder, Behaviour(project_to=256, delay=0.3)) as (base, _):
            first = await reembed_process(fresh_url, base, "--batch-size", "5")
            for _ in range(600):
                if await shadowed(fresh_url) >= 10 or first.returncode is not None:
                    break
                await asyncio.sleep(0.05)
            first.send_signal(signal.SIGKILL)
            await first.wait()
            done = await shadowed(fresh_url)
            assert 10 <= done < 40, f"the first run should die halfway, it did {done}"
            # the old space still serves: the server keeps recalling and writing meanwhile
            assert await space_of(fresh_url) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
            hits = (await alice.ok(RECALL, {"query": "how does this user like updates"}))["recall"]
            assert hits[0]["memory"]["content"] == "Prefers concise status updates."
            await alice.ok(
                SAVE_MANY,
                {"inputs": [{"content": "Saved while re-embedding.", "kind": "EPISODIC"}]},
            )

            second = await reembed_process(fresh_url, base, "--batch-size", "5", "--no-progress")
            out, err = await asyncio.wait_for(second.communicate(), timeout=300)
            assert second.returncode == 0, err.decode()
            assert "moved from sentence-transformers/all-MiniLM-L6-v2" in out.decode()

            assert await space_of(fresh_url) == (NEW_MODEL, 256)
            assert await models_of(fresh_url) == {(NEW_MODEL, 256): 41}
            assert await shadowed(fresh_url) == 0

            # a server with the new embedder starts and recalls in the new space
            new = tei_settings(fresh_url, base)
            remote = await create_embedder(new.embedder_config)
            try:
                async with (
                    serving(new, remote) as base_new,
                    httpx.AsyncClient(base_url=base_new, timeout=60) as http_new,
                ):
                    alice_new = GraphQLClient(http_new, tenant.key, "alice")
                    hits = (
                        await alice_new.ok(RECALL, {"query": "how does this user like updates"})
                    )["recall"]
                    assert hits[0]["memory"]["content"] == "Prefers concise status updates."
                    hits = (
                        await alice_new.ok(RECALL, {"query": "what was saved during the move"})
                    )["recall"]
                    assert "Saved while re-embedding." in [h["memory"]["content"] for h in hits]
            finally:
                await remote.close()


async def test_reembed_with_the_current_model_moves_nothing(fresh_url: str, embedder):
    from memql.reembed import reembed

    async with open_memql(Settings(database_url=fresh_url, pool_min_size=1), embedder=embedder):
        pass
    result = await reembed(fresh_url, embedder, progress=False)
    assert (result.embedded, result.moved) == (0, 0)
    assert await space_of(fresh_url) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
