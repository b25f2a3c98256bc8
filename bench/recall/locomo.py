"""Recall on LoCoMo's development half, end to end through GraphQL `saveMemories` and `recall`.

    .venv/bin/python bench/recall/locomo.py                  # data from ../shared/data/locomo-dev
    .venv/bin/python bench/recall/locomo.py --data DIR       # or MEMQL_LOCOMO_DIR=DIR
    .venv/bin/python bench/recall/locomo.py --dates          # also give session dates as occurredAt
    .venv/bin/python bench/recall/locomo.py --json out.json  # machine-readable figures

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0, for evaluation only) is not part of this
repository: the benchmark reads it from a directory beside it and stops, saying so, when it is not
there. The protocol is the data directory's README: every session observation is one EPISODIC
memory of the speaker it is listed under (user id: sample id + speaker), its dialog ids as
`sourceThreadIds`, saved 100 at a time; every question but the adversarial ones (category 5) and
those without evidence recalls 20 as the speaker it names, or as both speakers merged by score
when it names both or neither; a memory is relevant when its threads meet the evidence.
Prints R@1, R@5, R@10 and MRR overall and by category, and the recall latency (one request at a
time, measured by the client).
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
import uuid
from collections import defaultdict
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from run import graphql, memql_server

from memql.runtime import open_database, open_embedder
from memql.service import DEFAULT_WEIGHTS
from memql.settings import Settings
from memql.testing import make_tenant

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "locomo-dev"
DATA_FILE = "locomo-dev.json"
BATCH = 100  # memories per saveMemories, as the protocol says
LIMIT = 20
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DIALOG_ID = re.compile(r"D:?(\d+):(\d+)")

RECALL = """
query Recall($query: String!, $limit: Int!) {
  recall(query: $query, limit: $limit) { score memory { id sourceThreadIds } }
}
"""
SAVE_MANY = """
mutation SaveMany($inputs: [SaveMemoryInput!]!) {
  saveMemories(inputs: $inputs) { outcome memory { id } }
}
"""


def dialog_ids(value: Any) -> set[str]:
    """The dialog ids (`D3:14`) in an evidence or observation field, however it is written
    (a list, a string of several, the odd `D:11:26`)."""
    return {f"D{a}:{b}" for a, b in DIALOG_ID.findall(str(value))}


@dataclass(frozen=True)
class Question:
    sample: str
    text: str
    category: int
    evidence: frozenset[str]
    users: tuple[str, ...]  # the user ids it recalls as


def user_id(sample: str, speaker: str) -> str:
    return f"{sample}:{speaker}"


def session_date(text: str) -> str | None:
    """`1:56 pm on 8 May, 2023` as an ISO instant (UTC), or None when it does not parse."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").isoformat() + "Z"
    except ValueError:
        return None


def memories(sample: dict[str, Any], dates: bool) -> dict[str, list[dict[str, Any]]]:
    """Each user's save inputs, in session order."""
    conversation = sample["conversation"]
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    sessions = sorted(
        sample["observation"], key=lambda k: int(re.findall(r"\d+", k)[0])
    )  # session_N_observation
    for key in sessions:
        n = re.findall(r"\d+", key)[0]
        when = session_date(conversation.get(f"session_{n}_date_time", "")) if dates else None
        for speaker, facts in sample["observation"][key].items():
            for fact in facts:
                text, threads = fact[0], sorted(dialog_ids(fact[1:]))
                item: dict[str, Any] = {
                    "content": text,
                    "kind": "EPISODIC",
                    "sourceThreadIds": threads,
                }
                if when:
                    item["occurredAt"] = when
                out[user_id(sample["sample_id"], speaker)].append(item)
    return out


def questions(sample: dict[str, Any]) -> list[Question]:
    conversation = sample["conversation"]
    speakers = [conversation["speaker_a"], conversation["speaker_b"]]
    out = []
    for qa in sample["qa"]:
        evidence = dialog_ids(qa.get("evidence", []))
        if qa["category"] == 5 or not evidence:
            continue
        named = [s for s in speakers if re.search(rf"\b{re.escape(s)}\b", qa["question"], re.I)]
        chosen = named if len(named) == 1 else speakers
        users = tuple(user_id(sample["sample_id"], s) for s in chosen)
        out.append(Question(sample["sample_id"], qa["question"], qa["category"],
                            frozenset(evidence), users))  # fmt: skip
    return out


def figures(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks)
    at = {k: sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 5, 10)}
    return {
        "n": n,
        "r@1": at[1],
        "r@5": at[5],
        "r@10": at[10],
        "mrr": sum(1.0 / r for r in ranks if r is not None) / n,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(os.environ.get("MEMQL_LOCOMO_DIR", DEFAULT_DATA)),
        help="the directory holding locomo-dev.json (default: $MEMQL_LOCOMO_DIR or"
        " ../shared/data/locomo-dev beside the repository)",
    )
    parser.add_argument("--dates", action="store_true", help="give session dates as occurredAt")
    parser.add_argument("--json", type=Path, help="write the figures to this file as well")
    args = parser.parse_args(argv)
    source = args.data / DATA_FILE
    if not source.is_file():
        print(
            f"LoCoMo is not here: {source.resolve()} does not exist. It is not part of this"
            " repository (CC BY-NC 4.0, evaluation only); put its development half there or"
            " pass --data / MEMQL_LOCOMO_DIR.",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.WARNING)
    samples = json.loads(source.read_text(encoding="utf-8"))
    started = time.perf_counter()
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="memql-locomo-")))
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(open_database(settings))
        embedder = await stack.enter_async_context(open_embedder(settings))
        tenant = await make_tenant(url, name=f"locomo-{uuid.uuid4().hex[:8]}")
        http = await stack.enter_async_context(memql_server(url, embedder, DEFAULT_WEIGHTS))
        saved: dict[str, int] = defaultdict(int)
        for sample in samples:
            for user, inputs in memories(sample, args.dates).items():
                for i in range(0, len(inputs), BATCH):
                    data = await graphql(
                        http, tenant.key, user, SAVE_MANY, {"inputs": inputs[i : i + BATCH]}
                    )
                    for payload in data["saveMemories"]:
                        saved[payload["outcome"]] += 1
        asked = [q for s in samples for q in questions(s)]
        print(f"saved {dict(saved)}; {len(asked)} questions", file=sys.stderr)

        latencies: list[float] = []
        ranks: list[int | None] = []
        for q in asked:
            hits: list[tuple[float, set[str]]] = []
            for user in q.users:
                t0 = time.perf_counter()
                data = await graphql(
                    http, tenant.key, user, RECALL, {"query": q.text, "limit": LIMIT}
                )
                latencies.append((time.perf_counter() - t0) * 1000)
                hits += [(h["score"], set(h["memory"]["sourceThreadIds"])) for h in data["recall"]]
            # both speakers merged by score (stable: the first speaker's hit wins a tie)
            hits.sort(key=lambda h: -h[0])
            ranks.append(
                next((i for i, (_, t) in enumerate(hits[:LIMIT], 1) if t & q.evidence), None)
            )

    report: dict[str, Any] = {"all": figures(ranks)}
    for cat, name in CATEGORIES.items():
        report[name] = figures([r for r, q in zip(ranks, asked, strict=True) if q.category == cat])
    report["latency_ms"] = {
        "requests": len(latencies),
        "p50": statistics.median(latencies),
        "p95": percentile(latencies, 0.95),
    }
    print("\n| questions | n | R@1 | R@5 | R@10 | MRR |\n|---|---|---|---|---|---|")
    for name, f in report.items():
        if name != "latency_ms":
            print(
                f"| {name} | {f['n']} | {f['r@1']:.3f} | {f['r@5']:.3f} | {f['r@10']:.3f}"
                f" | {f['mrr']:.3f} |"
            )
    lat = report["latency_ms"]
    print(f"\nrecall latency over {lat['requests']} requests: p50 {lat['p50']:.1f} ms,"
          f" p95 {lat['p95']:.1f} ms")  # fmt: skip
    print(f"wall time {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
