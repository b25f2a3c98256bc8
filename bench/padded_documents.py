"""Memory a caller without credentials can pin with padded GraphQL documents.

    .venv/bin/python bench/padded_documents.py [--posts 24] [--kib 3500] [--rounds 3]

Starts `memql serve` (embedded PostgreSQL in a temporary directory), then sends `--rounds` times
`--posts` POSTs without credentials, each `{ __typename }` followed by `--kib` KiB of distinct
`#` comment lines (a few tokens: the token limit does not weigh comments), and prints the
server's resident memory before and after each round, and what the answers said. Run it with
another checkout's sources first on `PYTHONPATH` to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from memql.testing import ServeProcess


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def padded(n: int, kib: int) -> str:
    line = f"# {n:08d} " + "x" * 1000 + "\n"  # few tokens, many bytes
    return "{ __typename }\n" + line * (kib * 1024 // len(line))


async def attack(url: str, pid: int, posts: int, kib: int, rounds: int) -> None:
    seen: Counter[str] = Counter()
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        before = rss_mib(pid)
        print(f"- server RSS before: {before:.0f} MiB")
        n = 0
        for r in range(rounds):
            started = time.monotonic()
            for _ in range(posts):
                n += 1
                response = await http.post("/graphql", json={"query": padded(n, kib)})
                body = response.json()
                errors = body.get("errors") or []
                code = errors[0]["extensions"]["code"] if errors else "data"
                seen[f"{response.status_code} {code}"] += 1
            elapsed = time.monotonic() - started
            await asyncio.sleep(1)
            print(
                f"- after round {r + 1} ({posts} POSTs of {kib} KiB, {elapsed:.1f} s):"
                f" {rss_mib(pid):.0f} MiB"
            )
    print(f"- answers: {dict(seen)}")
    print(f"- growth: {rss_mib(pid) - before:+.0f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=24)
    parser.add_argument("--kib", type=int, default=3500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="memql-padded-")
    server = ServeProcess({"MEMQL_DATA_DIR": data_dir}, Path(data_dir), "serve")
    try:
        try:
            asyncio.run(server.ready(within=180))
        except RuntimeError as exc:
            raise SystemExit(f"memql serve did not become ready: {exc}") from None
        print(f"## padded documents: {sys.path[0]}")
        asyncio.run(attack(server.url, server.proc.pid, args.posts, args.kib, args.rounds))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
