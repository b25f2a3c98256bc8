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
    if settings.embedder in ("openai", "tei"):
        from memql.embeddings.openai import OpenAIEmbedder
        from memql.embeddings.remote import RemoteEmbedder
        from memql.embeddings.tei import TEIEmbedder

        if not settings.embeddings_url or not settings.embeddings_model:
            raise ConfigurationError(
                f"MEMQL_EMBEDDER={settings.embedder} needs MEMQL_EMBEDDINGS_URL and"
                " MEMQL_EMBEDDINGS_MODEL"
            )
        cls: type[RemoteEmbedder] = OpenAIEmbedder if settings.embedder == "openai" else TEIEmbedder
        remote = cls(
            settings.embeddings_url,
            settings.embeddings_model,
            dimensions=settings.embeddings_dimensions,
            api_key=settings.embeddings_api_key,
            timeout=settings.embeddings_timeout,
        )
        await remote.start()
        return remote
    raise ConfigurationError(
        f"MEMQL_EMBEDDER={settings.embedder!r} is not one of local, openai, tei"
    )
