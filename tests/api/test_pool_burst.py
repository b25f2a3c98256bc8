"""The burst that wedged the pool: one batched POST of many operations of 30 aliased
`memories { totalCount }` each, on a machine kept busy by another process. Every connection
comes back: within seconds `/metrics` shows the pool all available with nobody waiting, and an
ordinary request is served. Before, the cancelled fields of each failed operation lost
connections on their way back to the pool, and after a few bursts none was left."""

from __future__ import annotations

import asyncio
import multiprocessing
import re
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from memql.settings import Settings
from memql.testing import Tenant, serving

POOL = 3
ALIASES = " ".join(f"m{i}: memories(first: 200) {{ totalCount }}" for i in range(30))
BURST = [{"query": f"query Q{j} {{ {ALIASES} }}"} for j in range(10)]


def _spin(stop: multiprocessing.synchronize.Event) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


@pytest.fixture
def busy_machine() -> AsyncIterator[None]:
    """Another process keeping a core busy, as on the loaded machine of the report."""
    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
    spinner.start()
    try:
        yield
    finally:
        stop.set()
        spinner.join(10)


def pool_gauges(text: str) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r"^memql_db_pool_(\w+) (\S+)$", text, re.M)}


async def test_after_bursts_of_batched_counts_the_pool_is_whole_again_within_seconds(
    database_url: str, embedder, tenant: Tenant, busy_machine: None
):
    settings = Settings(
        database_url=database_url,
        batch_max=len(BURST),
        pool_min_size=POOL,
        pool_max_size=POOL,
        pool_timeout_seconds=0.5,
        request_timeout_seconds=2.0,
    )
    hdrs = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice"}
    async with (
        serving(settings, embedder) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        for _ in range(3):
            burst = await http.post("/graphql", json=BURST, headers=hdrs)
            assert burst.status_code in (200, 503), burst.text[:500]
        deadline = time.monotonic() + 5
        while True:
            gauges = pool_gauges((await http.get("/metrics")).text)
            whole = gauges.get("available") == gauges.get("size") == POOL
            if (whole and gauges.get("waiting") == 0) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert whole and gauges["waiting"] == 0, gauges
        ordinary = await http.post(
            "/graphql", json={"query": "{ memories(first: 5) { totalCount } }"}, headers=hdrs
        )
        assert ordinary.status_code == 200, ordinary.text
        assert ordinary.json() == {"data": {"memories": {"totalCount": 0}}}
