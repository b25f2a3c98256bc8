"""What tracing costs a request: off (the default), on and exporting, on but not sampled.

Starts an embedded PostgreSQL in a temporary directory, a loopback OTLP/HTTP sink in this
process (it answers 200 to every `POST /v1/traces` and counts the spans' bytes), and four
`memql serve` processes on the same database:

- `off` and `off-again`: no `OTEL_*` variable, as memql runs by default; two of them, so the
  difference between them is the noise of the machine;
- `on`: `OTEL_EXPORTER_OTLP_ENDPOINT` set to the sink: every request's spans (the request, the
  operation, its resolvers, each statement) batched and exported over OTLP/HTTP;
- `unsampled`: the same with `OTEL_TRACES_SAMPLER=always_off`: the instrumentation runs, no span
  is recorded.

With `--baseline-src DIR` a fifth, `before`, runs the memql sources in DIR (a checkout of the
commit before tracing came in) as it was: `off` against `before` is what the off switch costs.

It seeds one user with `--memories` memories, then, in `--rounds` rounds, each server in turn
(the order rotated each round) answers `--requests` of each operation from a client in another
process (`bench/graphql_client.py`): `viewer`, `recall(limit: 5)` with one question (its vector
cached after the first, so the embedding is not timed), a list of 20, and `saveMemory`. It
prints each operation's median latency per server and its ratio to `off`, then the server
process's CPU time per request (all its threads, from /proc: it does not wait for the machine's
other work, so it compares the builds even on a busy machine).

    python bench/tracing_cost.py --memories 200 --requests 200 --rounds 3 [--baseline-src DIR/src]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from graphql_client import time_from_another_process
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memql.runtime import open_database
from memql.settings import Settings
from memql.testing import ServeProcess, free_port, make_tenant

VIEWER = "{ viewer { userId } }"
RECALL = "query($q: String!) { recall(query: $q, limit: 5) { score memory { id } } }"
LIST = "{ memories(first: 20) { edges { node { id content } } } }"
SAVE = "mutation($input: SaveMemoryInput!) { saveMemory(input: $input) { outcome } }"
SAVE_MANY = "mutation($inputs: [SaveMemoryInput!]!) { saveMemories(inputs: $inputs) { outcome } }"
QUESTION = "what does the user prefer for breakfast"
OTEL_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_TRACES_SAMPLER",
    "OTEL_SDK_DISABLED",
)


@asynccontextmanager
async def otlp_sink() -> AsyncIterator[tuple[str, dict[str, int]]]:
    """An OTLP/HTTP receiver on loopback that accepts every export: its URL, and counts."""
    counts = {"exports": 0, "bytes": 0}

    async def traces(request: Request) -> Response:
        counts["exports"] += 1
        counts["bytes"] += len(await request.body())
        return Response(b"", media_type="application/x-protobuf")

    port = free_port()
    app = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the OTLP sink stopped before it started")
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", counts
    finally:
        server.should_exit = True
        await task


def cpu_seconds(pid: int) -> float:
    """CPU time (utime + stime, from /proc) of the process `pid`, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_env(
    database_url: str, sink: str, name: str, baseline: str | None
) -> dict[str, str | None]:
    env: dict[str, str | None] = dict.fromkeys(OTEL_VARIABLES)
    env["DATABASE_URL"] = database_url
    if name == "before":
        env["PYTHONPATH"] = baseline
    if name in ("on", "unsampled"):
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink
        env["OTEL_SERVICE_NAME"] = f"memql-bench-{name}"
    if name == "unsampled":
        env["OTEL_TRACES_SAMPLER"] = "always_off"
    return env


def bodies(op: str, n: int, round_: int, name: str) -> list[dict[str, Any]]:
    if op == "viewer":
        return [{"query": VIEWER}] * n
    if op == "recall":
        return [{"query": RECALL, "variables": {"q": QUESTION}}] * n
    if op == "list":
        return [{"query": LIST}] * n
    return [
        {
            "query": SAVE,
            "variables": {
                "input": {
                    "content": f"Round {round_} on {name}: note number {i} about the garden",
                    "kind": "EPISODIC",
                }
            },
        }
        for i in range(n)
    ]


async def main(memories: int, requests: int, rounds: int, baseline: str | None) -> None:
    names = ["off", "on", "unsampled", "off-again", *(["before"] if baseline else [])]
    ops = ["viewer", "recall", "list", "saveMemory"]
    with tempfile.TemporaryDirectory(prefix="memql-bench-tracing-") as tmp:
        work = Path(tmp)
        async with (
            open_database(Settings(data_dir=work / "data")) as url,
            otlp_sink() as (sink, counts),
        ):
            tenant = await make_tenant(url)
            headers = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "bench"}
            servers = {
                name: ServeProcess.on_database(
                    url, work, name, env=server_env(url, sink, name, baseline)
                )
                for name in names
            }
            try:
                for server in servers.values():
                    await server.ready()
                seed = [
                    {
                        "query": SAVE_MANY,
                        "variables": {
                            "inputs": [
                                {"content": f"Seeded memory {i + j} about food", "kind": "TOPICAL"}
                                for j in range(min(100, memories - i))
                            ]
                        },
                    }
                    for i in range(0, memories, 100)
                ]
                await time_from_another_process(servers["off"].url, headers, seed)
                # warm every server (and its cached query vector) before timing
                for server in servers.values():
                    for op in ops:
                        await time_from_another_process(
                            server.url, headers, bodies(op, 20, -1, server.name)
                        )
                timed: dict[tuple[str, str], list[float]] = defaultdict(list)
                # the server process's CPU milliseconds per request, per round
                cpu: dict[tuple[str, str], list[float]] = defaultdict(list)
                for round_ in range(rounds):
                    order = names[round_ % len(names) :] + names[: round_ % len(names)]
                    for name in order:
                        pid = servers[name].proc.pid
                        for op in ops:
                            before = cpu_seconds(pid)
                            timed[(name, op)] += await time_from_another_process(
                                servers[name].url, headers, bodies(op, requests, round_, name)
                            )
                            cpu[(name, op)].append((cpu_seconds(pid) - before) * 1000 / requests)
            finally:
                for server in servers.values():
                    server.stop()
            print(f"OTLP sink: {counts['exports']} exports, {counts['bytes']:,} bytes")
            print("| operation | " + " | ".join(names) + " | on / off | unsampled / off |")
            print("|---|" + "---|" * (len(names) + 2))
            for op in ops:
                med = {n: statistics.median(timed[(n, op)]) for n in names}
                cells = " | ".join(f"{med[n]:.2f}" for n in names)
                print(
                    f"| {op} | {cells} | {med['on'] / med['off']:.2f}"
                    f" | {med['unsampled'] / med['off']:.2f} |"
                )
            print("\nserver CPU ms per request (median of the rounds):")
            print("| operation | " + " | ".join(names) + " | on / off | unsampled / off |")
            print("|---|" + "---|" * (len(names) + 2))
            for op in ops:
                per = {n: statistics.median(cpu[(n, op)]) for n in names}
                cells = " | ".join(f"{per[n]:.2f}" for n in names)
                print(
                    f"| {op} | {cells} | {per['on'] / per['off']:.2f}"
                    f" | {per['unsampled'] / per['off']:.2f} |"
                )
            aa = {
                op: statistics.median(timed[("off-again", op)])
                / statistics.median(timed[("off", op)])
                for op in ops
            }
            print("off-again / off: " + ", ".join(f"{op} {r:.2f}" for op, r in aa.items()))
            if baseline:
                before = {
                    op: statistics.median(timed[("off", op)])
                    / statistics.median(timed[("before", op)])
                    for op in ops
                }
                print("off / before: " + ", ".join(f"{op} {r:.2f}" for op, r in before.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-src", help="memql sources to run as `before`")
    args = parser.parse_args()
    asyncio.run(main(args.memories, args.requests, args.rounds, args.baseline_src))
