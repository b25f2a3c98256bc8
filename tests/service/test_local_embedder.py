"""The local embedder gives sentence-transformers' vectors for the same model: every text of the
recall and absorb sets, and the edge cases, against the reference vectors that
`bench/embedding/reference.py` computed with sentence-transformers itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

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


async def test_every_text_matches_sentence_transformers(embedder: LocalEmbedder):
    texts, expected = reference.read()
    vectors = np.stack(await embedder.embed(texts))
    cosines = np.sum(vectors * expected, axis=1) / np.linalg.norm(expected, axis=1)
    below = [(t[:60], round(float(c), 5)) for t, c in zip(texts, cosines, strict=True) if c < 0.999]
    assert not below


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
