"""Fixtures of the API level: a memql server in the test process, reached over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from memql.embeddings.local import LocalEmbedder
from memql.settings import Settings
from memql.testing import GraphQLClient, HashEmbedder, Tenant, serving
from tests.fix_embedders import uses_model


@pytest.fixture(scope="session")
async def hash_server(postgres: str, hash_embedder: HashEmbedder) -> AsyncIterator[str]:
    async with serving(Settings(database_url=postgres, pool_max_size=20), hash_embedder) as url:
        yield url


@pytest.fixture(scope="session")
async def model_server(model_postgres: str, local_model: LocalEmbedder) -> AsyncIterator[str]:
    async with serving(Settings(database_url=model_postgres, pool_max_size=20), local_model) as url:
        yield url


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> str:
    """The default server of the module's world: the built-in per-consumer access policy."""
    return str(request.getfixturevalue("model_server" if uses_model(request) else "hash_server"))


@pytest.fixture
async def http(server: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server, timeout=60) as client:
        yield client


@pytest.fixture
def alice(http: httpx.AsyncClient, tenant: Tenant) -> GraphQLClient:
    return GraphQLClient(http, tenant.key, "alice")


@pytest.fixture
def bob(http: httpx.AsyncClient, tenant: Tenant) -> GraphQLClient:
    return GraphQLClient(http, tenant.key, "bob")
