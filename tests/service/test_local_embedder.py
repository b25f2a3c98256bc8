"""The local embedder gives sentence-transformers' vectors for the same model: every text of the
recall and absorb sets, and the edge cases, against the reference vectors that
`bench/embedding/reference.py` computed with sentence-transformers itself (float32), on every
runtime it can run (OpenVINO, in bfloat16 where the CPU computes it, and ONNX Runtime)."""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from memql.embeddings import local
from memql.embeddings.local import LocalEmbedder

pytestmark = pytest.mark.model

SCRIPT = Path(__file__).parents[2] / "bench" / "embedding" / "reference.py"


def _reference_module():
    spec = importlib.util.spec_from_file_location("embedding_reference", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


reference = _reference_module()


def test_the_reference_covers_exactly_the_current_sets():
    texts, vectors = reference.read()
    assert texts == reference.texts(), "bench sets changed: rerun bench/embedding/reference.py"
    assert vectors.shape == (len(texts), 384)


@pytest.fixture(scope="module", params=["openvino", "onnxruntime"])
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[LocalEmbedder]:
    """The model on each runtime (OpenVINO asks for bfloat16: it computes float32 on a CPU
    without it, which `runtime.runtime` then names)."""
    model = await LocalEmbedder.load(runtime=request.param)
    yield model
    await model.close()


def test_the_default_runtime_is_openvino_bfloat16_exactly_where_the_cpu_computes_it(
    embedder: LocalEmbedder,
):
    expected = "openvino-bf16" if local.cpu_has_bf16() else "onnxruntime-f32"
    assert embedder.runtime == expected


async def test_every_text_matches_sentence_transformers(runtime: LocalEmbedder):
    """Faithful to float32: bfloat16 must not move any vector out of the model's space (the
    stored vectors and a new query's have to be comparable under one `embedding_model`)."""
    texts, expected = reference.read()
    vectors = np.stack(await runtime.embed(texts))
    cosines = np.sum(vectors * expected, axis=1) / np.linalg.norm(expected, axis=1)
    below = [(t[:60], round(float(c), 6)) for t, c in zip(texts, cosines, strict=True)]
    below = [b for b in below if b[1] < 0.9999]
    assert not below, (runtime.runtime, below)


async def test_a_text_alone_matches_it_in_a_batch_of_32(runtime: LocalEmbedder):
    """A query (embedded alone) and the same text saved in a batch of 32 mixed lengths (padded
    to the longest) land on the same vector, so a memory recalls with its own words."""
    texts, _ = reference.read()
    batch = sorted(texts, key=len)[:: max(1, len(texts) // 32)][:32]
    assert len(batch) == 32 and len({len(t) for t in batch}) > 16
    batched = await runtime.embed(batch)
    for text, in_batch in zip(batch, batched, strict=True):
        [alone] = await runtime.embed([text])
        assert float(np.dot(alone, in_batch)) >= 0.99999, (runtime.runtime, text[:60])


async def test_a_batch_is_split_across_every_worker(embedder: LocalEmbedder):
    """Saving several memories keeps every core busy: a batch of 4 texts a worker or more runs
    as one pass per worker, side by side; a query stays one pass."""
    seen: list[tuple[str, int]] = []
    real = embedder._runner

    class Recording:
        name = real.name

        def run(self, ids, mask):
            seen.append((threading.current_thread().name, len(ids)))
            return real.run(ids, mask)

    embedder._runner = Recording()
    try:
        texts, _ = reference.read()
        await embedder.embed(texts[:1])
        assert [n for _, n in seen] == [1]
        seen.clear()
        vectors = await embedder.embed(texts[: local.MIN_PART * embedder.workers])
    finally:
        embedder._runner = real
    assert len(vectors) == local.MIN_PART * embedder.workers
    assert sorted(n for _, n in seen) == [local.MIN_PART] * embedder.workers


async def test_one_text_alone_matches_it_in_a_batch(embedder: LocalEmbedder):
    """Padding in a batch changes nothing: the mask keeps padded tokens out of every sum."""
    texts, _ = reference.read()
    short, long = min(texts, key=len), max(texts, key=len)
    alone = [(await embedder.embed([t]))[0] for t in (short, long)]
    batched = await embedder.embed([short, long])
    for a, b in zip(alone, batched, strict=True):
        assert float(np.dot(a, b)) > 0.99999


async def test_text_beyond_the_token_limit_is_truncated_not_refused(embedder: LocalEmbedder):
    """The model reads its first 256 tokens, like sentence-transformers: what follows them
    does not move the vector."""
    base = " ".join(f"step {i} of the migration runbook checks the replica lag" for i in range(60))
    [v, longer] = await embedder.embed([base, base + " and then the cat sat on a warm mat"])
    assert float(np.dot(v, longer)) > 0.99999
