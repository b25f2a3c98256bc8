"""memql at a million memories: build once, then time every read and a save over HTTP.

Build (once, into --data-dir, reused by later runs): an embedded PostgreSQL with one project
holding 10,000 users x 90 memories plus 100,000 shared ones (random clustered unit vectors of 384
dimensions, 8-word sentences from a 2,000-word vocabulary, 1% of the shared rows in category
`rare`). Rows go in through `COPY ... FROM STDIN (FORMAT BINARY)` (vectors in pgvector's binary
form) with the secondary indexes dropped first; each index is then rebuilt and timed, the HNSW
index of project-scope vectors last, then `VACUUM ANALYZE`.

Measure: a `memql serve` process on that database, whose PostgreSQL has just read the project
scope's HNSW and full-text indexes into its cache (`pg_prewarm`; a server up for a while holds
them, as every project recall walks them); each operation below in turn, round after
round (so all see the same load), over real HTTP, with users and queries drawn at random
(`--query-words` words of the vocabulary, 3 by default: about 8 model tokens, the length of the
recall set's questions; the cost of the query's embedding grows with its tokens):
user-scope recall, project-scope recall, project recall with the 1% category filter, recall with
no scope (both), `memories(first: 50)`, `memoryContext`, `saveMemory`. Then p50/p95/p99, the
server's RSS and the database's size; `--explain` prints `EXPLAIN (ANALYZE, BUFFERS)` of each
read's statement at this size (through auto_explain, on the principal's transaction), and
`--statements N` times each recall's statement alone, N times on one connection, and the
reads of a `memoryContext` without a query (its rows and the live count, decoded).

    python bench/scale.py --data-dir /work/scale-data              # build if needed, measure
    python bench/scale.py --data-dir /work/scale-data --explain    # and print the plans
    python bench/scale.py --data-dir /work/scale-data --build-only --statements 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psycopg
from graphql_client import GraphQLClient
from pgvector.psycopg import register_vector_async

from memql.access.credentials import display_prefix, generate_key, hash_key
from memql.db import embedding_space as space
from memql.db import memories as db_memories
from memql.db import recall as db_recall
from memql.db import tenants
from memql.db.migrate import migrate
from memql.db.session import bind_principal
from memql.embeddings.local import DEFAULT_MODEL
from memql.model import Access, Consumer, Grant, Order, Principal, Scope
from memql.requests import Criteria, MemoryFilter
from memql.rules.pagination import Window
from memql.runtime import open_database
from memql.service import DEFAULT_WEIGHTS
from memql.settings import Limits, Settings

DIMS = 384
# read into PostgreSQL's cache before timing (pg_prewarm): the project scope's vector and
# full-text indexes
PREWARMED = ("memories_project_ann_384", "memories_project_fts")
PROJECT = "scale"
RARE = "rare"
COLUMNS = (
    "id, project_id, scope, owner_id, kind, content, category, created_by, created_at,"
    " updated_at, embedding_model, embedding"
)
TYPES = [
    "uuid", "uuid", "text", "text", "text", "text", "text", "text", "timestamptz",
    "timestamptz", "text", "vector",
]  # fmt: skip
KINDS = ("topical", "episodic", "operational")


def vocabulary(rng: np.random.Generator, size: int = 2000) -> list[str]:
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables, size=int(rng.integers(2, 4)))))
    return sorted(words)


def sentence(rng: np.random.Generator, words: list[str], n: int = 8) -> str:
    return " ".join(words[i] for i in rng.integers(0, len(words), n))


class Vectors:
    """Unit vectors around 256 random centres, as embeddings of related texts cluster."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.centres = rng.standard_normal((256, DIMS)).astype(np.float32)

    def batch(self, n: int) -> np.ndarray:
        centre = self.centres[self.rng.integers(0, len(self.centres), n)]
        v = centre + 0.6 * self.rng.standard_normal((n, DIMS)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


async def build(url: str, args: argparse.Namespace, model: str, state: Path) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    words = vocabulary(rng)
    vectors = Vectors(rng)
    timings: dict[str, Any] = {}
    await migrate(url)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await register_vector_async(conn)
        project = await tenants.create_project(conn, PROJECT)
        if project is None:
            raise RuntimeError(
                f"the database already holds a project {PROJECT!r}: a fresh --data-dir"
            )
        key = generate_key()
        await tenants.insert_api_key(
            conn, project.id, display_prefix(key), hash_key(key), Consumer.AGENT
        )
        await space.record_embedding_space(conn, model, DIMS)
        cur = await conn.execute(
            "select indexname, indexdef from pg_indexes where tablename = 'memories'"
            " and indexname <> 'memories_pkey'"
        )
        indexes = await cur.fetchall()
        for name, _ in indexes:
            await conn.execute(f'drop index "{name}"')
        now = datetime.now(UTC)
        started = time.perf_counter()
        owners = [(f"user-{u:05d}", "user") for u in range(args.users)] * args.per_user
        owners += [("", "project")] * args.shared
        order = rng.permutation(len(owners))  # interleave owners as real traffic would
        copy_sql = f"copy memories ({COLUMNS}) from stdin (format binary)"
        async with conn.cursor() as cur, cur.copy(copy_sql) as copy:
            copy.set_types(TYPES)
            for start in range(0, len(order), 10_000):
                chunk = order[start : start + 10_000]
                vecs = vectors.batch(len(chunk))
                ages = rng.uniform(0, 365 * 86400, len(chunk))
                for i, row in enumerate(chunk):
                    owner, scope = owners[row]
                    if scope == "project":
                        category = RARE if rng.random() < 0.01 else f"c{rng.integers(10)}"
                    else:
                        category = "general"
                    at = now - timedelta(seconds=float(ages[i]))
                    await copy.write_row(
                        (
                            uuid.uuid4(), project.id, scope, owner,
                            KINDS[int(rng.integers(3))], sentence(rng, words), category,
                            owner or "import", at, at, model, vecs[i],
                        )
                    )  # fmt: skip
                print(f"  loaded {start + len(chunk):,} rows", file=sys.stderr)
        timings["load_s"] = round(time.perf_counter() - started, 1)
        timings["index_s"] = {}
        for name, definition in indexes:
            started = time.perf_counter()
            await conn.execute(definition)
            timings["index_s"][name] = round(time.perf_counter() - started, 1)
            print(f"  index {name}: {timings['index_s'][name]} s", file=sys.stderr)
        started = time.perf_counter()
        await conn.execute("set maintenance_work_mem = '1GB'")
        await space.ensure_ann_index(conn, DIMS)
        timings["index_s"][space.ann_index_name(DIMS)] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        await conn.execute("vacuum analyze memories")
        timings["vacuum_analyze_s"] = round(time.perf_counter() - started, 1)
    await asyncio.to_thread(state.write_text, json.dumps({"key": key, "build": timings}, indent=2))
    return timings


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


RECALL = """query($q: String!, $scope: MemoryScope, $categories: [String!]) {
  recall(query: $q, limit: 5, scope: $scope, categories: $categories) { score memory { id } } }"""
LIST = "{ memories(first: 50) { edges { node { id content } } } }"
CONTEXT = "{ memoryContext { text count omitted } }"
# the rows a context block without a query chooses from
CONTEXT_CANDIDATES = Limits().context_candidates
SAVE = """mutation($input: SaveMemoryInput!) { saveMemory(input: $input) { outcome } }"""


async def measure(url: str, key: str, args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(int(time.time()))
    words = vocabulary(np.random.default_rng(7))
    port = args.port
    # a server that has been up a while holds the shared scope's indexes in PostgreSQL's cache
    # (every project recall walks them); this one has just started
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("create extension if not exists pg_prewarm")
        for index in PREWARMED:
            await conn.execute("select pg_prewarm(%s)", (index,))
    env = {**os.environ, "DATABASE_URL": url, "MEMQL_PORT": str(port), "MEMQL_GRAPHIQL": "false"}
    proc = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is timed)
        [sys.executable, "-m", "memql.cli", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    results: dict[str, list[float]] = {}
    try:
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            for _ in range(600):
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.5)
            else:
                raise RuntimeError("the server did not become ready")

            def user() -> str:
                return f"user-{int(rng.integers(args.users)):05d}"

            def recall(scope: str | None, categories: list[str] | None = None) -> dict[str, Any]:
                return {
                    "query": RECALL,
                    "variables": {"q": sentence(rng, words, args.query_words), "scope": scope,
                                  "categories": categories},
                }  # fmt: skip

            ops: dict[str, Any] = {
                "recall, user scope": lambda: recall("USER"),
                "recall, project scope": lambda: recall("PROJECT"),
                "recall, project scope, 1% category": lambda: recall("PROJECT", [RARE]),
                "recall, no scope (both)": lambda: recall(None),
                "memories(first: 50)": lambda: {"query": LIST},
                "memoryContext": lambda: {"query": CONTEXT},
                "saveMemory": lambda: {
                    "query": SAVE,
                    "variables": {"input": {"content": sentence(rng, words), "kind": "TOPICAL"}},
                },
            }
            results = {name: [] for name in ops}
            client = GraphQLClient(port)
            for round_ in range(args.warmup + args.requests):
                for name, make in ops.items():
                    headers = {"Authorization": f"Bearer {key}", "X-User-Id": user()}
                    started = time.perf_counter()
                    status, body = client.post(make(), headers)
                    elapsed = (time.perf_counter() - started) * 1000
                    if status != 200 or body.get("errors"):
                        raise RuntimeError(f"{name}: {status} {body}")
                    if round_ >= args.warmup:
                        results[name].append(elapsed)
            rss = rss_mb(proc.pid)
            client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("select pg_database_size(current_database())")
        row = await cur.fetchone()
        db_size = int(row[0]) if row else 0
        cur = await conn.execute("select count(*) from memories")
        row = await cur.fetchone()
        rows = int(row[0]) if row else 0

    def pct(values: list[float], p: float) -> float:
        return float(np.percentile(values, p))

    return {
        "rows": rows,
        "server_rss_mb": round(rss, 1),
        "database_mb": round(db_size / 2**20, 1),
        "operations": {
            name: {
                "p50": round(statistics.median(v), 2),
                "p95": round(pct(v, 95), 2),
                "p99": round(pct(v, 99), 2),
                "n": len(v),
            }
            for name, v in results.items()
        },
    }


# the four recalls timed and explained: (scopes, categories)
RECALL_CASES: dict[str, tuple[list[Scope], list[str] | None]] = {
    "recall, user scope": ([Scope.USER], None),
    "recall, project scope": ([Scope.PROJECT], None),
    "recall, project scope, 1% category": ([Scope.PROJECT], [RARE]),
    "recall, no scope (both)": ([Scope.USER, Scope.PROJECT], None),
}


def criteria(scopes: list[Scope], categories: list[str] | None) -> Criteria:
    return Criteria(tuple(scopes), MemoryFilter(categories=categories and tuple(categories)))


async def scale_principal(conn: psycopg.AsyncConnection[Any], user: str) -> Principal:
    """`user` of the scale project, as an agent key acts for it."""
    cur = await conn.execute("select id from projects where name = %s", (PROJECT,))
    row = await cur.fetchone()
    assert row is not None
    return Principal(
        row[0], PROJECT, user, Consumer.AGENT, Grant(Access.READ_WRITE, Access.READ)
    )  # fmt: skip


async def explain(url: str, model: str) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of each read's statement, as the server runs it."""
    rng = np.random.default_rng(3)
    words = vocabulary(np.random.default_rng(7))
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await register_vector_async(conn)
        principal = await scale_principal(conn, "user-00042")
        plans: list[str] = []
        conn.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
        await conn.execute("load 'auto_explain'")
        await conn.execute(
            "set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on;"
            " set auto_explain.log_buffers = on; set auto_explain.log_timing = on;"
            " set client_min_messages = log"
        )
        await conn.execute("set role memql_app")
        await conn.commit()
        vector = Vectors(rng).batch(1)[0]
        both = [Scope.USER, Scope.PROJECT]

        async def show(title: str, run: Any, settings: Any = ()) -> None:
            async with conn.transaction():
                await bind_principal(conn, principal, settings)
                plans.clear()
                await run()
                # a plan is logged when its portal closes, with the next statement: this one
                # brings the last plan of `run`
                await conn.execute("select 'flush'")
            print(f"\n### {title}\n")
            for plan in plans:
                if "set_config(" not in plan and "'flush'" not in plan:
                    print(f"```\n{plan}\n```")

        for title, (scopes, categories) in RECALL_CASES.items():
            await show(
                title,
                lambda scopes=scopes, categories=categories: db_recall.recall(
                    conn, principal, query=sentence(rng, words), embedding=vector, model=model,
                    criteria=criteria(scopes, categories), weights=DEFAULT_WEIGHTS, limit=5,
                ),
                db_recall.RECALL_SETTINGS,
            )  # fmt: skip
        await show(
            "memories(first: 50)",
            lambda: db_memories.list_page(
                conn, principal, Criteria(tuple(both)), Window(Order(), 50)
            ),
        )
        await show(
            "memoryContext (the rows, then the live count)",
            lambda: db_memories.context_memories(conn, principal, Criteria(tuple(both)), 500),
        )
        for scope in (Scope.USER, Scope.PROJECT):
            await show(
                f"saveMemory's near-duplicate search, {scope.value} scope",
                lambda scope=scope: db_memories.near_duplicates(
                    conn, principal, scope, vector, model, threshold=0.75, limit=10
                ),
                db_memories.NEAR_DUPLICATE_SETTINGS,
            )


async def time_statements(url: str, model: str, runs: int) -> None:
    """Each recall's statement alone, then a context block's reads (its rows and the live
    count), `runs` times each on one connection as the server sends them (psycopg prepares a
    statement on its fifth run): medians in ms, a new user and query each time, the first 5
    runs left out."""
    rng = np.random.default_rng(5)
    words = vocabulary(np.random.default_rng(7))
    vectors = Vectors(rng)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await register_vector_async(conn)
        principal = await scale_principal(conn, "user-00000")
        await conn.execute("set role memql_app")
        await conn.commit()

        async def recall(who: Principal, scopes: list[Scope], categories: Any) -> None:
            ranked = await db_recall.recall(
                conn, who, query=sentence(rng, words, 3), embedding=vectors.batch(1)[0],
                model=model, criteria=criteria(scopes, categories), weights=DEFAULT_WEIGHTS,
                limit=5,
            )  # fmt: skip
            await ranked.hits()

        async def context(who: Principal) -> None:
            both = (Scope.USER, Scope.PROJECT)
            await db_memories.context_memories(conn, who, Criteria(both), CONTEXT_CANDIDATES)

        # what each timed read binds with, and the read
        reads: dict[str, tuple[Any, Any]] = {
            name: (db_recall.RECALL_SETTINGS, partial(recall, scopes=scopes, categories=cats))
            for name, (scopes, cats) in RECALL_CASES.items()
        }
        reads["memoryContext, its rows and live count"] = ((), context)
        print(f"\n| statement ({runs} runs) | median ms |\n|---|---:|")
        for name, (settings, read) in reads.items():
            times = []
            for _ in range(runs):
                principal = replace(principal, user_id=f"user-{int(rng.integers(10_000)):05d}")
                async with conn.transaction():
                    await bind_principal(conn, principal, settings)
                    started = time.perf_counter()
                    await read(principal)
                    times.append((time.perf_counter() - started) * 1000)
            print(f"| {name} | {statistics.median(times[5:]):.2f} |")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("/work/scale-data"))
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--per-user", type=int, default=90)
    parser.add_argument("--shared", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument(
        "--statements", type=int, default=0, metavar="N",
        help="time each recall statement, and the context reads, N times",
    )  # fmt: skip
    parser.add_argument("--json", type=Path)
    # the vocabulary's made-up words take ~2.6 model tokens each: 3 of them make a query of
    # ~8 tokens, as long as the recall set's questions (7.8 on average); 8 make ~21
    parser.add_argument("--query-words", type=int, default=3)
    args = parser.parse_args()

    args.data_dir.mkdir(parents=True, exist_ok=True)
    state = args.data_dir / "scale.json"
    # migrated: a database built by an older memql gets its newer indexes
    async with open_database(Settings(data_dir=args.data_dir)) as url:
        if not state.exists():
            print(f"building {args.users * args.per_user + args.shared:,} memories...")
            print(json.dumps(await build(url, args, DEFAULT_MODEL, state), indent=2))
        saved = json.loads(state.read_text())
        print("build:", json.dumps(saved["build"]))
        if args.explain:
            await explain(url, DEFAULT_MODEL)
        if args.statements:
            await time_statements(url, DEFAULT_MODEL, args.statements)
        if args.build_only:
            return 0
        result = await measure(url, saved["key"], args)
        result["build"] = saved["build"]
        print(f"\n{result['rows']:,} memories; server RSS {result['server_rss_mb']} MB;"
              f" database {result['database_mb']} MB\n")  # fmt: skip
        print("| operation | p50 ms | p95 ms | p99 ms | requests |")
        print("|---|---:|---:|---:|---:|")
        for name, f in result["operations"].items():
            print(f"| {name} | {f['p50']} | {f['p95']} | {f['p99']} | {f['n']} |")
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
