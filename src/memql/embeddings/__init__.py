"""The embedder registry: one provider per module, chosen by configuration, imported lazily."""

from __future__ import annotations

from memql.embeddings.base import Embedder, Vector
from memql.errors import ConfigurationError
from memql.settings import Settings

__all__ = ["Embedder", "Vector", "create_embedder"]


async def create_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "local":
        from memql.embeddings.local import LocalEmbedder

        return await LocalEmbedder.load(settings.embeddings_model)
    raise ConfigurationError(
        f"MEMQL_EMBEDDER={settings.embedder!r} is not available in this version; use 'local'"
    )
