"""A batch of a saveMemories' size embedded as one pass against split across every worker.

Each size is embedded both ways, alternately, in one loop (so both see the same machine load);
prints texts per second, the median of `--rounds` rounds, and the ratio split / one pass.

    .venv/bin/python bench/embedding/split.py [--runtime auto] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from speed import reference_texts

from memql.embeddings.local import LocalEmbedder


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="auto")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    embedder = await LocalEmbedder.load(runtime=args.runtime)
    texts = reference_texts()
    split = embedder.parts_for
    print(f"{embedder.runtime}, {embedder.workers} workers")
    print("| texts | one pass texts/s | split texts/s | split / one pass |")
    print("|---|---|---|---|")
    for size in (8, 16, 32):
        batch = texts[:size]
        rates: dict[str, list[float]] = {"one": [], "split": []}
        for _ in range(args.rounds):
            for name in rates:
                embedder.parts_for = (lambda n: 1) if name == "one" else split  # type: ignore[method-assign]
                t0 = time.perf_counter()
                await embedder.embed(batch)
                rates[name].append(size / (time.perf_counter() - t0))
        one, parts = statistics.median(rates["one"]), statistics.median(rates["split"])
        print(f"| {size} | {one:.0f} | {parts:.0f} | {parts / one:.2f} |")
    await embedder.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
