"""A deterministic embedder without a model, for tests whose point is not meaning."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from memql.embeddings.base import Vector

WORD = re.compile(r"\w+")


class HashEmbedder:
    """Feature hashing of words: each word (lower-cased) adds one to a coordinate its hash
    picks, with a sign its hash picks too; the sum is scaled to unit length.

    The same text always gets the same vector, on every machine and in every process; texts
    made of the same words are identical, texts sharing some words are close, texts sharing
    none are nearly orthogonal. Nothing else is meant: a paraphrase with other words is far
    away. Loading costs nothing and embedding is pure arithmetic, so a test that only needs
    memories to be saved, listed, streamed or refused starts at once.

    Its vectors are not the real model's: a database written with it records its own space
    (`model`), and a server with the real model refuses to start on it (`memql reembed`).
    """

    def __init__(self, dimensions: int = 384) -> None:
        self.model = f"memql-testing/word-hash-{dimensions}"
        self.dimensions = dimensions

    def vector(self, text: str) -> Vector:
        out = np.zeros(self.dimensions, dtype=np.float32)
        # a text without words is still one point of its own
        for word in WORD.findall(text.lower()) or [text]:
            digest = hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            n = int.from_bytes(digest, "little")
            out[(n >> 1) % self.dimensions] += 1.0 if n & 1 else -1.0
        norm = float(np.linalg.norm(out))
        if norm == 0.0:
            # the words cancelled out: fall back to the whole text's own coordinate
            digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            out[int.from_bytes(digest, "little") % self.dimensions] = 1.0
            norm = 1.0
        return out / norm

    async def embed(self, texts: list[str]) -> list[Vector]:
        return [self.vector(text) for text in texts]

    async def close(self) -> None:
        return None
