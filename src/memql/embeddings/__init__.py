"""The embedder registry: one provider per module, chosen by configuration, imported lazily."""

from __future__ import annotations

from memql.embeddings.base import Embedder, Vector
from memql.errors import ConfigurationError
from memql.model import EmbedderConfig

__all__ = ["Embedder", "Vector", "create_embedder"]


async def create_embedder(config: EmbedderConfig) -> Embedder:
    if config.provider == "local":
        from memql.embeddings.local import LocalEmbedder

        return await LocalEmbedder.load(config.model, config.runtime)
    if config.provider in ("openai", "tei"):
        from memql.embeddings.openai import OpenAIEmbedder
        from memql.embeddings.remote import RemoteEmbedder
        from memql.embeddings.tei import TEIEmbedder

        if not config.url or not config.model:
            raise ConfigurationError(
                f"MEMQL_EMBEDDER={config.provider} needs MEMQL_EMBEDDINGS_URL and"
                " MEMQL_EMBEDDINGS_MODEL"
            )
        cls: type[RemoteEmbedder] = OpenAIEmbedder if config.provider == "openai" else TEIEmbedder
        remote = cls(
            config.url,
            config.model,
            dimensions=config.dimensions,
            api_key=config.api_key,
            timeout=config.timeout,
        )
        await remote.start()
        return remote
    raise ConfigurationError(f"MEMQL_EMBEDDER={config.provider!r} is not one of local, openai, tei")
