"""One contract for every embedder: local, and openai and tei against a real local HTTP server
speaking their wire formats (serving the real model's vectors)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import numpy as np
import pytest

from memql.embeddings import Embedder, create_embedder
from memql.embeddings.local import LocalEmbedder
from memql.embeddings.openai import OpenAIEmbedder
from memql.embeddings.remote import EmbeddingError, RemoteEmbedder
from memql.embeddings.tei import TEIEmbedder
from memql.errors import ConfigurationError
from memql.settings import Settings
from tests.embedding_server import Behaviour, embedding_server

pytestmark = pytest.mark.model

API_KEY = "sk-test-contract"


def remote_settings(kind: str, base: str, **extra: object) -> Settings:
    url = f"{base}/v1" if kind == "openai" else base
    return Settings(
        embedder=kind,
        embeddings_url=url,
        embeddings_model=f"test/{kind}-model",
        embeddings_api_key=API_KEY,
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture(params=["local", "openai", "tei"])
async def provider(
    request: pytest.FixtureRequest, embedder: LocalEmbedder
) -> AsyncIterator[Embedder]:
    """Each embedder, configured through the registry as a deployment would configure it."""
    if request.param == "local":
        yield embedder
        return
    async with embedding_server(embedder, Behaviour(api_key=API_KEY)) as (base, _):
        remote = await create_embedder(remote_settings(request.param, base).embedder_config)
        try:
            yield remote
        finally:
            await remote.close()


async def test_every_text_gets_one_unit_vector_of_the_declared_dimension_in_order(provider):
    texts = ["Prefers concise status updates.", "Has a greyhound called Pixel.", "LED-2291"]
    vectors = await provider.embed(texts)
    assert len(vectors) == 3
    for v in vectors:
        assert v.shape == (provider.dimensions,)
        assert v.dtype == np.float32
        assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-4
    # order is kept: each matches its own text embedded alone
    for text, v in zip(texts, vectors, strict=True):
        [alone] = await provider.embed([text])
        assert float(np.dot(alone, v)) > 0.999


async def test_no_texts_give_no_vectors(provider):
    assert await provider.embed([]) == []


async def test_a_paraphrase_is_closer_than_an_unrelated_statement(provider):
    stored, paraphrase, unrelated = await provider.embed(
        [
            "Prefers concise status updates.",
            "how does this user like updates",
            "Has a greyhound who needs walking at lunchtime.",
        ]
    )
    assert float(np.dot(stored, paraphrase)) > float(np.dot(stored, unrelated)) + 0.2


async def test_a_batch_larger_than_one_request_comes_back_whole_and_in_order(provider):
    texts = [f"memory number {i} about topic {i % 7}" for i in range(150)]
    vectors = await provider.embed(texts)
    assert len(vectors) == 150
    [last] = await provider.embed([texts[-1]])
    assert float(np.dot(last, vectors[-1])) > 0.999
    assert float(np.dot(last, vectors[0])) < 0.999


async def test_the_model_name_and_dimension_are_declared(provider):
    assert provider.model
    assert provider.dimensions == 384


# --- remote only: the wire, timeouts and retries --------------------------------------------

REMOTE = pytest.mark.parametrize("kind", ["openai", "tei"])


@REMOTE
async def test_a_stalled_request_times_out_and_the_retry_succeeds(embedder, kind):
    behaviour = Behaviour(api_key=API_KEY, stall=1, stall_seconds=15.0)
    async with embedding_server(embedder, behaviour) as (base, seen):
        cls = OpenAIEmbedder if kind == "openai" else TEIEmbedder
        url = f"{base}/v1" if kind == "openai" else base
        remote = cls(url, "m", api_key=API_KEY, timeout=1.5, backoff=0.05)
        try:
            started = time.monotonic()
            [v] = await remote.embed(["Prefers concise status updates."])
            # did not wait for the stalled answer (room for a loaded machine's retry)
            assert time.monotonic() - started < 12.0
        finally:
            await remote.close()
    assert v.shape == (384,)
    assert seen.requests == 2


@REMOTE
async def test_an_overloaded_server_is_retried_with_backoff(embedder, kind):
    async with embedding_server(embedder, Behaviour(api_key=API_KEY, fail=2)) as (base, seen):
        remote = await create_embedder(remote_settings(kind, base).embedder_config)
        try:
            assert remote.dimensions == 384
        finally:
            await remote.close()
    assert seen.requests == 3  # two 503s, then the probe succeeded


@REMOTE
async def test_a_server_that_keeps_failing_is_an_error_after_the_last_attempt(embedder, kind):
    async with embedding_server(embedder, Behaviour(api_key=API_KEY, fail=100)) as (base, seen):
        cls = OpenAIEmbedder if kind == "openai" else TEIEmbedder
        url = f"{base}/v1" if kind == "openai" else base
        remote = cls(url, "m", api_key=API_KEY, attempts=3, backoff=0.01)
        try:
            with pytest.raises(EmbeddingError, match="failed 3 times"):
                await remote.embed(["anything"])
        finally:
            await remote.close()
    assert seen.requests == 3


async def test_a_wrong_api_key_fails_at_once_with_the_servers_answer(embedder):
    async with embedding_server(embedder, Behaviour(api_key=API_KEY)) as (base, seen):
        remote = OpenAIEmbedder(f"{base}/v1", "m", api_key="sk-wrong")
        try:
            with pytest.raises(EmbeddingError, match="401"):
                await remote.embed(["anything"])
        finally:
            await remote.close()
    assert seen.requests == 1  # a client error is not retried


@REMOTE
async def test_a_configured_dimension_the_server_does_not_give_refuses_to_start(embedder, kind):
    async with embedding_server(embedder, Behaviour(api_key=API_KEY)) as (base, _):
        with pytest.raises(ConfigurationError, match="384 dimensions, but 512"):
            await create_embedder(
                remote_settings(kind, base, embeddings_dimensions=512).embedder_config
            )


async def test_an_unreachable_embedder_refuses_to_start_with_its_address():
    with pytest.raises(ConfigurationError, match="did not answer"):
        await create_embedder(
            Settings(
                embedder="tei",
                embeddings_url="http://127.0.0.1:9",
                embeddings_model="m",
                embeddings_timeout=0.5,
            ).embedder_config
        )


def test_a_remote_embedder_without_url_or_model_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="MEMQL_EMBEDDINGS_URL and MEMQL_EMBEDDINGS_MODEL"):
        Settings.from_env({"MEMQL_EMBEDDER": "openai", "MEMQL_EMBEDDINGS_URL": "http://x/v1"})


def test_remote_embedders_share_one_base():
    assert issubclass(OpenAIEmbedder, RemoteEmbedder)
    assert issubclass(TEIEmbedder, RemoteEmbedder)
