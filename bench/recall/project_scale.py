"""Project-scope recall at scale: the HNSW route against an exact scan.

Fills one project's shared scope with N memories whose vectors are synthetic (clustered unit
vectors, seeded), 1% of them in a rare category, then asks Q queries (near existing memories)
through `db.recall.recall` twice each: as the planner chooses (the HNSW route with iterative
scan) and with index scans off (an exact scan). Reports how many of the exact top 5 the index
route finds, with and without the rare-category filter, and the median latency of each.

    .venv/bin/python bench/recall/project_scale.py --memories 20000 --queries 50
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector_async

from memql.db import embedding_space as space
from memql.db import recall as db_recall
from memql.db import tenants
from memql.db.pool import owner_connection
from memql.model import Access, Consumer, Grant, Principal, Scope, Weights
from memql.requests import Criteria, MemoryFilter
from memql.runtime import open_database
from memql.settings import Settings

DIMS = 384
VECTOR_ONLY = Weights(1.0, 0.0, 0.0, 0.0, 90.0)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


async def fill(
    conn: psycopg.AsyncConnection[Any], project_id: uuid.UUID, vectors: np.ndarray
) -> None:
    n = len(vectors)
    async with (
        conn.cursor() as cur,
        cur.copy(
            "copy memories (id, project_id, scope, owner_id, kind, content, category,"
            " created_by, embedding_model, embedding) from stdin"
        ) as copy,
    ):
        for i in range(n):
            category = "rare" if i % 100 == 0 else "common"
            await copy.write_row(
                (
                    uuid.uuid4(),
                    project_id,
                    "project",
                    "",
                    "topical",
                    f"shared note {i}",
                    category,
                    "bench",
                    "synthetic",
                    "[" + ",".join(f"{x:.6f}" for x in vectors[i]) + "]",
                )
            )


async def ask(
    conn: psycopg.AsyncConnection[Any],
    principal: Principal,
    query: np.ndarray,
    categories: list[str] | None,
    *,
    exact: bool,
) -> tuple[list[uuid.UUID], float, bool]:
    async with conn.transaction():
        if exact:
            await conn.execute("set local enable_indexscan = off")
        for name, value in db_recall.RECALL_SETTINGS:
            await conn.execute("select set_config(%s, %s, true)", (name, value))
        started = time.perf_counter()
        ranked = await db_recall.recall(
            conn,
            principal,
            query="zzqx",  # no full-text match: the vector route alone
            embedding=query,
            model="synthetic",
            criteria=Criteria(
                (Scope.PROJECT,), MemoryFilter(categories=categories and tuple(categories))
            ),
            weights=VECTOR_ONLY,
            limit=5,
        )
        rows = await ranked.hits()
        elapsed = (time.perf_counter() - started) * 1000
        cur = await conn.execute(
            "select pg_stat_get_xact_numscans(%s::regclass)", (space.ann_index_name(DIMS),)
        )
        row = await cur.fetchone()
    return [m.id for m, _, _ in rows], elapsed, bool(row and row[0])


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()

    rng = np.random.default_rng(11)
    centres = unit(rng.standard_normal((args.memories // 50, DIMS)))
    members = centres[rng.integers(0, len(centres), args.memories)]
    vectors = unit(members + 0.6 * rng.standard_normal((args.memories, DIMS)) / np.sqrt(DIMS))

    data_dir = Path(tempfile.mkdtemp(prefix="memql-scale-"))
    # never prepared: a cached plan would ignore `enable_indexscan` and the "exact" runs
    # would reuse the index plan
    async with (
        open_database(Settings(data_dir=data_dir)) as url,
        await owner_connection(url, autocommit=True, prepare_threshold=None) as conn,
    ):
        project = await tenants.create_project(conn, "scale")
        t0 = time.perf_counter()
        await fill(conn, project.id, vectors)
        loaded = time.perf_counter() - t0
        t0 = time.perf_counter()
        await space.ensure_ann_index(conn, DIMS)
        indexed = time.perf_counter() - t0
        await conn.execute("analyze memories")
        await register_vector_async(conn)
        print(
            f"{args.memories} shared memories loaded in {loaded:.1f} s,"
            f" HNSW index built in {indexed:.1f} s",
            file=sys.stderr,
        )
        principal = Principal(
            project.id,
            project.name,
            "bench",
            Consumer.AGENT,
            Grant(Access.READ_WRITE, Access.READ_WRITE),
        )
        picks = rng.integers(0, args.memories, args.queries)
        queries = unit(vectors[picks] + 0.3 * rng.standard_normal((args.queries, DIMS)) / 20)
        print(
            "| filter | found of the exact top 5 | planner used the index |"
            " index route (ms) | exact scan (ms) |"
        )
        print("|---|---|---|---|---|")
        for label, categories in (("none", None), ("1% category", ["rare"])):
            found, fast, slow, used = [], [], [], 0
            for q in queries:
                ids, t_index, via_index = await ask(conn, principal, q, categories, exact=False)
                truth, t_exact, _ = await ask(conn, principal, q, categories, exact=True)
                found.append(len(set(ids) & set(truth)) / len(truth))
                fast.append(t_index)
                slow.append(t_exact)
                used += via_index
            print(
                f"| {label} | {statistics.mean(found):.3f} | {used}/{len(queries)}"
                f" | {statistics.median(fast):.1f} | {statistics.median(slow):.1f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
