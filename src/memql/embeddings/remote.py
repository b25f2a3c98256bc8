"""What every remote embedder shares: one async HTTP client, timeouts, retries, unit vectors."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import numpy as np

from memql.embeddings.base import Vector
from memql.errors import ConfigurationError

log = logging.getLogger(__name__)

#: statuses worth another try: rate limits and a server that is restarting or overloaded
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class EmbeddingError(RuntimeError):
    """The embedding service did not answer usefully, even after retries."""


class RemoteEmbedder:
    """Base of the HTTP embedders: subclasses build the request and read the response.

    A request that times out, cannot connect or gets a retryable status is tried again after an
    exponential backoff, `attempts` times in all; anything else fails at once.
    """

    #: how many texts go in one request
    batch_size = 64

    def __init__(
        self,
        url: str,
        model: str,
        *,
        dimensions: int | None = None,
        api_key: str | None = None,
        timeout: float = 10.0,
        attempts: int = 3,
        backoff: float = 0.2,
    ) -> None:
        self.url = url.rstrip("/")
        self.model = model
        self.dimensions = dimensions or 0
        self._configured_dimensions = dimensions
        self._attempts = max(1, attempts)
        self._backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout), headers=headers)

    # subclasses --------------------------------------------------------------------------

    endpoint = ""

    def _body(self, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _vectors(self, body: Any) -> list[list[float]]:
        raise NotImplementedError

    # -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Learn (or check) the dimension with one request; fail clearly when unreachable."""
        try:
            [probe] = await self.embed(["memql dimension probe"])
        except EmbeddingError as exc:
            await self.close()
            raise ConfigurationError(
                f"the {self.kind} embedder at {self.url} did not answer: {exc}"
            ) from exc
        except ConfigurationError:
            await self.close()
            raise
        self.dimensions = int(probe.shape[0])

    @property
    def kind(self) -> str:
        return type(self).__name__.removesuffix("Embedder").lower()

    async def embed(self, texts: list[str]) -> list[Vector]:
        vectors: list[Vector] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            rows = self._vectors(await self._post(self._body(batch)))
            if len(rows) != len(batch):
                raise EmbeddingError(f"asked for {len(batch)} embeddings, got {len(rows)}")
            for row in rows:
                vector = np.asarray(row, dtype=np.float32)
                expected = self._configured_dimensions or self.dimensions
                if expected and vector.shape[0] != expected:
                    raise ConfigurationError(
                        f"the {self.kind} embedder returned {vector.shape[0]} dimensions, but"
                        f" {expected} are configured (MEMQL_EMBEDDINGS_DIMENSIONS)"
                    )
                norm = float(np.linalg.norm(vector))
                vectors.append(vector / norm if norm > 0 else vector)
        return vectors

    async def _post(self, body: dict[str, Any]) -> Any:
        target = f"{self.url}{self.endpoint}"
        last: str = ""
        for attempt in range(1, self._attempts + 1):
            try:
                response = await self._http.post(target, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__} {exc}".strip()
            else:
                if response.status_code < 400:
                    return response.json()
                last = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code not in RETRY_STATUSES:
                    raise EmbeddingError(f"{target} answered {last}")
            if attempt < self._attempts:
                delay = self._backoff * 2 ** (attempt - 1)
                log.warning(
                    "embedding request failed (%s); retry %d in %.1fs", last, attempt, delay
                )
                await asyncio.sleep(delay)
        raise EmbeddingError(f"{target} failed {self._attempts} times; last: {last}")

    async def close(self) -> None:
        await self._http.aclose()
