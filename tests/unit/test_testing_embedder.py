"""The deterministic embedder of memql.testing keeps its promises: the same text gives the same
unit vector in every process, shared words make texts close, disjoint words keep them apart."""

from __future__ import annotations

import numpy as np

from memql.testing import HashEmbedder


async def test_every_text_gets_one_unit_vector_of_the_declared_dimension_in_order():
    embedder = HashEmbedder(dimensions=64)
    texts = ["Prefers tea.", "", "!!!", "Prefers coffee."]
    vectors = await embedder.embed(texts)
    assert len(vectors) == len(texts)
    for v in vectors:
        assert v.shape == (64,) and v.dtype == np.float32
        assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-6
    assert embedder.model == "memql-testing/word-hash-64"
    assert await embedder.embed([]) == []


async def test_the_same_words_give_the_same_vector_and_other_words_another():
    embedder = HashEmbedder()
    a, same, cased, other = await embedder.embed(
        ["Prefers tea.", "Prefers tea.", "PREFERS   tea", "Keeps bees in the garden."]
    )
    assert np.array_equal(a, same)
    # words, lower-cased, are all that counts
    assert np.allclose(a, cased)
    assert not np.allclose(a, other)


async def test_shared_words_make_texts_closer_than_disjoint_ones():
    embedder = HashEmbedder()
    base, sharing, disjoint = await embedder.embed(
        [
            "The deploy runs on Tuesdays after standup.",
            "The deploy runs on Fridays.",
            "Keeps bees in a garden in Lyon.",
        ]
    )
    assert float(base @ sharing) > 0.5
    assert abs(float(base @ disjoint)) < 0.3


def test_a_vector_is_the_same_in_every_process():
    # no per-process salt (Python's str hash is salted, PYTHONHASHSEED): vectors stored by one
    # process are found by another. Pinned here, so a salted hash would fail in almost every run
    # and a change of the hashing shows up as a change of these two coordinates.
    v = HashEmbedder().vector("Prefers tea.")
    half = float(np.float32(0.5**0.5))
    assert {int(i): float(v[i]) for i in np.flatnonzero(v)} == {16: half, 349: -half}
