"""One mixed workload (recall, list, save, subscribers) on one PostgreSQL and on a primary with
a hot standby serving the reads (`MEMQL_READ_DATABASE_URL`), alternating in the same run.

    PYTHONPATH=src .venv/bin/python bench/scale_out.py [--projects 4] [--seed 500]
        [--seconds 20] [--rounds 3] [--recallers 4] [--listers 2] [--savers 2]
        [--subscribers 2] [--embedder hash|local]

A tiny setting that only checks that it runs (seconds, not figures):

    PYTHONPATH=src .venv/bin/python bench/scale_out.py --projects 2 --seed 20 --seconds 2 \\
        --rounds 1 --recallers 1 --listers 1 --savers 1 --subscribers 1

Both configurations run on the same primary (a `memql.testing.StandbyPair`, loopback, fsync
off), one memql in this process each (`open_memql`), alternating round by round so that their
ratios come from the same minutes of a machine. Each project gets `--seed` memories first.
Per round and configuration, for `--seconds`:

- recallers and listers: recall / list as users of random projects who wrote nothing;
- savers: each saves project-scope memories as its own user, and reads its own save back at
  once (a list filtered by its text): a save not there is a read-your-write violation;
- subscribers: `memoryEvents(scope: PROJECT)` streams per project; every project-scope event
  of a project must arrive in cursor order, once, without gaps (cursors count per project).

Printed per round: operations/s, recall and save p50/p95 (ms), the reads that waited for the
standby or went to the primary instead (`memql_standby_reads`), events/s received, and lost,
repeated or reordered events and read-your-write violations (each must be 0). Then the
standby's recall p50 over the primary's, per round. The machine's other load shows in the
absolute figures: quote the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from memql import metrics
from memql.model import Access, Consumer, Grant, Kind, Principal, Scope
from memql.requests import MemoryDraft, MemoryFilter, RecallQuery
from memql.runtime import Memql, open_database, open_memql
from memql.settings import Settings
from memql.testing import HashEmbedder, Tenant, make_tenant
from memql.testing.standby import StandbyPair

WORDS = [
    "coffee", "tea", "deploy", "kubernetes", "invoice", "budget", "garden", "piano", "travel",
    "berlin", "tokyo", "paris", "python", "rust", "postgres", "cache", "replica", "standby",
    "meeting", "dentist", "birthday", "marathon",
]  # fmt: skip


def sentence(rng: random.Random, n: int = 8) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def principal(tenant: Tenant, user: str) -> Principal:
    return Principal(
        tenant.project_id,
        tenant.project_name,
        user,
        Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


@dataclass
class Round:
    config: str
    ops: int = 0
    recall: list[float] = field(default_factory=list)
    save: list[float] = field(default_factory=list)
    violations: int = 0
    events: int = 0
    lost: int = 0
    repeated: int = 0
    reordered: int = 0
    reads: dict[str, float] = field(default_factory=dict)


OUTCOMES = (
    "standby",
    "standby_waited",
    "primary_behind",
    "primary_away",
    "primary_refused",
    "primary_unknown",
)


def standby_reads() -> dict[str, float]:
    return {o: metrics.STANDBY_READS.labels(o)._value.get() for o in OUTCOMES}


async def workload(memql: Memql, tenants: list[Tenant], args: Any, result: Round) -> None:
    service = memql.service
    rng = random.Random(7)
    stop = time.monotonic() + args.seconds
    last: dict[tuple[int, uuid.UUID], int] = {}

    async def recaller(i: int) -> None:
        while time.monotonic() < stop:
            tenant = rng.choice(tenants)
            started = time.perf_counter()
            await service.recall(principal(tenant, f"reader-{i}"), RecallQuery(sentence(rng, 4)))
            result.recall.append(time.perf_counter() - started)
            result.ops += 1

    async def lister(i: int) -> None:
        while time.monotonic() < stop:
            tenant = rng.choice(tenants)
            await service.list_memories(
                principal(tenant, f"lister-{i}"), MemoryFilter(scope=Scope.PROJECT)
            )
            result.ops += 1

    async def saver(i: int) -> None:
        tenant = tenants[i % len(tenants)]
        me = principal(tenant, f"saver-{i}-{result.config}")
        n = 0
        while time.monotonic() < stop:
            n += 1
            text = f"{sentence(rng)} marker{i}x{n}x{uuid.uuid4().hex[:8]}"
            started = time.perf_counter()
            await service.save(me, MemoryDraft(text, Kind.EPISODIC, scope=Scope.PROJECT))
            result.save.append(time.perf_counter() - started)
            page = await service.list_memories(me, MemoryFilter(scope=Scope.PROJECT, contains=text))
            if not any(m.content == text for m in page.memories):
                result.violations += 1
            result.ops += 2

    async def subscriber(s: int, tenant: Tenant) -> None:
        stream = service.memory_events(principal(tenant, f"sub-{s}"), scope=Scope.PROJECT)
        key = (s, tenant.project_id)
        try:
            while True:
                event = await asyncio.wait_for(anext(stream), max(0.1, stop - time.monotonic()))
                previous = last.get(key)
                if previous is not None:
                    if event.cursor <= previous:
                        result.repeated += event.cursor == previous
                        result.reordered += event.cursor < previous
                        continue
                    result.lost += event.cursor - previous - 1
                last[key] = event.cursor
                result.events += 1
        except TimeoutError:
            pass
        finally:
            await stream.aclose()

    subs = [asyncio.create_task(subscriber(s, t)) for s in range(args.subscribers) for t in tenants]
    await asyncio.sleep(0.2)  # the streams are set up
    before = standby_reads()
    await asyncio.gather(
        *(recaller(i) for i in range(args.recallers)),
        *(lister(i) for i in range(args.listers)),
        *(saver(i) for i in range(args.savers)),
    )
    after = standby_reads()
    result.reads = {o: after[o] - before[o] for o in OUTCOMES}
    # let the last events arrive, then stop the subscribers
    await asyncio.sleep(1.0)
    stop = time.monotonic()
    for task in subs:
        task.cancel()
    await asyncio.gather(*subs, return_exceptions=True)


@asynccontextmanager
async def memql_for(
    primary: str, read_url: str | None, embedder: Any, args: Any
) -> AsyncIterator[Memql]:
    settings = Settings(
        database_url=primary,
        read_database_url=read_url,
        pool_max_size=args.pool,
        subscriber_queue=100_000,
    )
    async with open_memql(settings, embedder=embedder) as memql:
        yield memql


def row(r: Round, seconds: float) -> str:
    waited = r.reads.get("standby_waited", 0)
    primary = sum(v for k, v in r.reads.items() if k.startswith("primary"))
    return (
        f"| {r.config} | {r.ops / seconds:.0f} | {pct(r.recall, 0.5):.2f} |"
        f" {pct(r.recall, 0.95):.2f} | {pct(r.save, 0.5):.2f} | {pct(r.save, 0.95):.2f} |"
        f" {waited:.0f} / {primary:.0f} | {r.events / seconds:.0f} |"
        f" {r.lost} / {r.repeated} / {r.reordered} | {r.violations} |"
    )


async def main(args: Any) -> None:
    if args.embedder == "local":
        from memql.embeddings.local import LocalEmbedder

        embedder: Any = await LocalEmbedder.load()
    else:
        embedder = HashEmbedder()
    pair = await asyncio.to_thread(StandbyPair)
    try:
        async with open_database(Settings(database_url=pair.primary_url)) as primary:
            tenants = [await make_tenant(primary) for _ in range(args.projects)]
            rng = random.Random(1)
            async with memql_for(primary, None, embedder, args) as memql:
                for tenant in tenants:
                    seeder = principal(tenant, "seeder")
                    for start in range(0, args.seed, 100):
                        count = min(100, args.seed - start)
                        await memql.service.save_many(
                            seeder,
                            [
                                MemoryDraft(
                                    f"{sentence(rng)} seed {start + k}",
                                    Kind.TOPICAL,
                                    scope=Scope.PROJECT,
                                )
                                for k in range(count)
                            ],
                        )
            print(
                "| config | ops/s | recall p50 ms | recall p95 ms | save p50 ms | save p95 ms"
                " | standby waits / primary reads | events/s | lost / repeated / reordered"
                " | own-write misses |"
            )
            print("|---|---|---|---|---|---|---|---|---|---|")
            ratios = []
            for _ in range(args.rounds):
                p50 = {}
                for config, read_url in (("one PostgreSQL", None), ("primary + standby", "")):
                    url = pair.on_standby(primary) if read_url is not None else None
                    result = Round(config)
                    async with memql_for(primary, url, embedder, args) as memql:
                        await workload(memql, tenants, args, result)
                    print(row(result, args.seconds), flush=True)
                    p50[config] = pct(result.recall, 0.5)
                ratios.append(p50["primary + standby"] / p50["one PostgreSQL"])
            print("recall p50, standby / primary, per round:", [f"{r:.2f}" for r in ratios])
            if len(ratios) > 1:
                print(f"median ratio {statistics.median(ratios):.2f}")
    finally:
        await asyncio.to_thread(pair.stop)
        if args.embedder == "local":
            await embedder.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", type=int, default=4)
    parser.add_argument("--seed", type=int, default=500, help="memories per project first")
    parser.add_argument("--seconds", type=float, default=20.0, help="per round and config")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--recallers", type=int, default=4)
    parser.add_argument("--listers", type=int, default=2)
    parser.add_argument("--savers", type=int, default=2)
    parser.add_argument("--subscribers", type=int, default=2, help="per project")
    parser.add_argument("--pool", type=int, default=10, help="connections per pool")
    parser.add_argument("--embedder", choices=("hash", "local"), default="hash")
    asyncio.run(main(parser.parse_args()))
