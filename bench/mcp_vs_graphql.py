"""What the MCP layer costs over GraphQL for the same recall and list, against a running server.

    KEY=$(.venv/bin/memql keys create --project dev | tail -n1)
    .venv/bin/python bench/mcp_vs_graphql.py --url http://127.0.0.1:8000 --key "$KEY"

Seeds a fresh user with memories, then times the same operations through `/graphql` (one HTTP
POST each) and through `/mcp` (the official client, one initialised session, one tool call each),
interleaved so both see the same machine load. Prints medians and the MCP/GraphQL ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

RECALL = "query($q: String!) { recall(query: $q, limit: 5) { score memory { id content } } }"
LIST = "{ memories(first: 20) { edges { node { id content } } } }"
SAVE = "mutation($i: SaveMemoryInput!) { saveMemory(input: $i) { outcome } }"

FACTS = [
    "Prefers concise status updates.",
    "Works at Globex in the platform team.",
    "Allergic to shellfish.",
    "Has two cats called Miso and Nori.",
    "Runs a marathon every spring.",
    "Prefers Slack over email.",
    "Lives in Porto.",
    "Speaks Portuguese and English.",
    "On 2026-03-02 moved the launch to April.",
    "Always cite sources in reports.",
]


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return (time.perf_counter() - start) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", required=True)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()

    headers = {"Authorization": f"Bearer {args.key}", "X-User-Id": f"bench-{uuid.uuid4().hex[:8]}"}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=60) as gql:
        for fact in FACTS:
            kind = "EPISODIC" if "2026" in fact else "TOPICAL"
            body = (
                await gql.post(
                    "/graphql",
                    json={"query": SAVE, "variables": {"i": {"content": fact, "kind": kind}}},
                )
            ).json()
            assert "errors" not in body, body

        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(f"{args.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()

            async def gql_recall() -> None:
                r = await gql.post(
                    "/graphql",
                    json={"query": RECALL, "variables": {"q": "how does she like to be contacted"}},
                )
                assert "errors" not in r.json()

            async def mcp_recall() -> None:
                r = await mcp.call_tool(
                    "recall_memory", {"query": "how does she like to be contacted"}
                )
                assert not r.is_error

            async def gql_list() -> None:
                r = await gql.post("/graphql", json={"query": LIST})
                assert "errors" not in r.json()

            async def mcp_list() -> None:
                r = await mcp.call_tool("list_memories", {"first": 20})
                assert not r.is_error

            pairs = {"recall": (gql_recall, mcp_recall), "list": (gql_list, mcp_list)}
            results: dict[str, tuple[list[float], list[float]]] = {}
            for name, (g, m) in pairs.items():
                for _ in range(5):  # warm up
                    await g()
                    await m()
                gs, ms = [], []
                for _ in range(args.rounds):
                    gs.append(await timed(g))
                    ms.append(await timed(m))
                results[name] = (gs, ms)

    print(f"{args.rounds} rounds each, medians in ms")
    print("| operation | GraphQL | MCP | MCP / GraphQL |")
    print("|---|---|---|---|")
    for name, (gs, ms) in results.items():
        g, m = statistics.median(gs), statistics.median(ms)
        print(f"| {name} | {g:.2f} | {m:.2f} | {m / g:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
