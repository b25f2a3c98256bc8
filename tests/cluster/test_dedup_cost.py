"""The absorption guards cost time linear in the text: a `saveMemories` batch of 100
near-identical 8,192-character contents, long runs of word characters without a digit (where a
backtracking pattern goes quadratic), is saved by a real `memql serve` within a generous CPU
budget, and absorbs as any other batch of near-identical texts does.

The server runs in its own process so that the guard (the client's timeout, and the server's
CPU time read from the operating system) holds even when a request blocks the server's event
loop. With quadratic guards this batch took minutes of CPU; linear ones take a few seconds,
nearly all of it the embedding of the contents."""

from __future__ import annotations

import string
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import psutil
import pytest

from memql.rules import dedup
from memql.testing import GraphQLClient, ServeProcess, make_tenant
from tests.operations import SAVE_MANY

# `memql serve` loads the real model, and the batch's absorption rests on its embeddings
pytestmark = pytest.mark.model

CONTENT = 8192
# CPU seconds the server may spend on the batch: more than ten times what it takes on a loaded
# two-core machine, and far below what quadratic guards spend (minutes)
CPU_BUDGET = 60.0


def near_identical(count: int) -> list[str]:
    """`count` texts of CONTENT characters differing only in their last two letters: words
    beyond what the model reads (its 256 tokens), so their embeddings are the same, then one
    long run of letters."""
    words = "the service keeps a long note " * 60
    body = words + "memoryservice" * ((CONTENT - len(words)) // 13 + 1)
    letters = string.ascii_lowercase
    return [f"{body[: CONTENT - 3]}_{letters[i % 26]}{letters[i // 26]}" for i in range(count)]


@pytest.fixture(scope="module")
async def instance(database_url: str) -> AsyncIterator[ServeProcess]:
    server = ServeProcess.on_database(
        database_url, Path(tempfile.mkdtemp(prefix="memql-dedup-")), "dedup"
    )
    try:
        await server.ready()
        yield server
    finally:
        server.stop()


def test_the_guards_read_a_long_run_of_word_characters_as_one_token():
    text = near_identical(1)[0]
    run = text.rsplit(" ", 1)[1]
    assert len(run) > 6000
    assert dedup.literals(text) == frozenset()
    assert dedup.comparisons(text) == frozenset()
    assert dedup.literals(text + " v2") == {"v2"}
    assert dedup.literals(text + "9") == {run + "9"}
    assert dedup.comparisons(text + " over tea") == {(run, "tea")}


async def test_a_batch_of_100_near_identical_long_contents_stays_within_a_cpu_budget(
    instance, database_url
):
    tenant = await make_tenant(database_url)
    inputs = [{"content": c, "kind": "TOPICAL"} for c in near_identical(100)]
    server = psutil.Process(instance.proc.pid)
    async with httpx.AsyncClient(base_url=instance.url, timeout=5 * CPU_BUDGET) as http:
        client = GraphQLClient(http, tenant.key, "long-texts")
        before = server.cpu_times()
        data = await client.ok(SAVE_MANY, {"inputs": inputs})
        after = server.cpu_times()
    spent = (after.user + after.system) - (before.user + before.system)
    results = data["saveMemories"]
    # the same absorption as for short texts: one memory, every other save absorbed into it
    assert [r["outcome"] for r in results] == ["CREATED"] + ["ABSORBED"] * 99
    assert len({r["memory"]["id"] for r in results}) == 1
    assert spent < CPU_BUDGET, f"the batch took {spent:.1f} s of server CPU"
