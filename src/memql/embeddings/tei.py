"""Hugging Face text-embeddings-inference: `POST {url}/embed`."""

from __future__ import annotations

from typing import Any

from memql.embeddings.remote import EmbeddingError, RemoteEmbedder


class TEIEmbedder(RemoteEmbedder):
    """`MEMQL_EMBEDDINGS_URL` is the server's base URL; the server serves one model, whose name
    (`MEMQL_EMBEDDINGS_MODEL`) is what the database records."""

    endpoint = "/embed"
    # TEI's default --max-client-batch-size is 32
    batch_size = 32

    def _body(self, texts: list[str]) -> dict[str, Any]:
        return {"inputs": texts, "normalize": True, "truncate": True}

    def _vectors(self, body: Any) -> list[list[float]]:
        if not isinstance(body, list) or not all(isinstance(row, list) for row in body):
            raise EmbeddingError(f"not an /embed response: {str(body)[:200]}")
        return body
