"""Any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, Ollama, LiteLLM, ...)."""

from __future__ import annotations

from typing import Any

from memql.embeddings.remote import EmbeddingError, RemoteEmbedder


class OpenAIEmbedder(RemoteEmbedder):
    """`MEMQL_EMBEDDINGS_URL` is the API base (`https://api.openai.com/v1`); requests go to
    `{url}/embeddings`. With `MEMQL_EMBEDDINGS_DIMENSIONS` the model is asked for that many."""

    endpoint = "/embeddings"

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self._configured_dimensions:
            body["dimensions"] = self._configured_dimensions
        return body

    def _vectors(self, body: Any) -> list[list[float]]:
        try:
            data = sorted(body["data"], key=lambda item: item["index"])
            return [item["embedding"] for item in data]
        except (KeyError, TypeError) as exc:
            raise EmbeddingError(f"not an embeddings response: {str(body)[:200]}") from exc
