"""Fixtures of every level: the embedded PostgreSQL, the embedders, tenants.

The suite runs one embedded PostgreSQL with two databases: one written with the deterministic
`HashEmbedder` (every test whose point is not meaning) and one with the real local model (test
modules marked `model`: ranking, absorption, recall quality). A module's `database_url` and
`embedder` are those of its world, and so are the servers built from them (`tests/api/`), so a
test never mixes vectors of two spaces. Each world is started the first time a test needs it.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memql import runtime
from memql.db import tenants
from memql.db.pool import owner_connection
from memql.embeddings import Embedder
from memql.embeddings.local import LocalEmbedder
from memql.model import JwtConfig
from memql.runtime import open_database
from memql.settings import Settings
from memql.testing import HashEmbedder, Tenant, fresh_database, make_tenant
from memql.testing.standby import StandbyPair

pytest_plugins = ["tests.browser", "tests.npm"]


def uses_model(request: pytest.FixtureRequest) -> bool:
    """Whether the module (or class) asking is marked `model`."""
    return request.node.get_closest_marker("model") is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # the world is chosen per module (its servers are shared by the module's tests): a single
    # test marked `model` in a module that is not would silently run without the model
    for item in items:
        module = item.getparent(pytest.Module)
        if item.get_closest_marker("model") and not (module and module.get_closest_marker("model")):
            raise pytest.UsageError(
                f"{item.nodeid}: mark the whole module `model` (pytestmark), not one test"
            )


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="memql-test-"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reads-on-standby",
        action="store_true",
        help="run on a primary with a hot standby (memql.testing.standby), every memql the"
        " tests start reading on the standby (as MEMQL_READ_DATABASE_URL would)",
    )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if config.getoption("--reads-on-standby"):
        from memql import metrics

        counts = {
            sample.labels["outcome"]: int(sample.value)
            for metric in metrics.STANDBY_READS.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        }
        terminalreporter.write_line(f"reads with the read URL on the standby, by outcome: {counts}")


@pytest.fixture(scope="session")
async def postgres(data_dir: Path, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """The embedded PostgreSQL, started as the app starts it; the URL of the database the
    deterministic embedder writes. With `--reads-on-standby`: a primary and its hot standby
    instead, and every memql started on a database of the primary reads on the standby."""
    if not request.config.getoption("--reads-on-standby"):
        async with open_database(Settings(data_dir=data_dir)) as url:
            yield url
        return
    pair = await asyncio.to_thread(StandbyPair, data_dir / "replicated")
    patch = pytest.MonkeyPatch()

    def read_url(settings: Settings, url: str) -> str | None:
        on_primary = f"127.0.0.1:{pair.primary_port}/" in url
        return settings.read_database_url or (pair.on_standby(url) if on_primary else None)

    patch.setattr(runtime, "read_url", read_url)
    try:
        async with open_database(Settings(database_url=pair.primary_url)) as url:
            yield url
    finally:
        patch.undo()
        await asyncio.to_thread(pair.stop)


@pytest.fixture(scope="session")
async def model_postgres(postgres: str) -> AsyncIterator[str]:
    """The database the real model writes, on the same server."""
    async with fresh_database(postgres) as url:
        yield url


@pytest.fixture(scope="session")
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture(scope="session")
async def local_model() -> AsyncIterator[LocalEmbedder]:
    """The real all-MiniLM-L6-v2, loaded once for every test that needs it."""
    model = await LocalEmbedder.load()
    yield model
    await model.close()


@pytest.fixture(scope="module")
def database_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("model_postgres" if uses_model(request) else "postgres"))


@pytest.fixture(scope="module")
def read_database_url(database_url: str) -> str:
    """Where a memql started on `database_url` reads recall, lists, blocks and counts: the
    database itself, or its standby with `--reads-on-standby`."""
    return runtime.read_url(Settings(database_url=database_url), database_url) or database_url


@pytest.fixture(scope="module")
def embedder(request: pytest.FixtureRequest) -> Embedder:
    found: Embedder = request.getfixturevalue(
        "local_model" if uses_model(request) else "hash_embedder"
    )
    return found


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A direct connection, for setting up projects and checking what the database holds."""
    async with await owner_connection(database_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
async def tenant(database_url: str) -> Tenant:
    """A fresh project with an agent API key, so tests never see each other's memories."""
    return await make_tenant(database_url)


@pytest.fixture
async def jwt_tenant(database_url: str) -> tuple[Tenant, str]:
    """A fresh project that also trusts browser tokens signed with the returned HS256 secret."""
    tenant = await make_tenant(database_url)
    secret = "a-shared-secret-of-32-bytes-or-more-" + tenant.project_name
    async with await owner_connection(database_url, autocommit=True) as conn:
        await tenants.set_project_jwt(
            conn,
            tenant.project_name,
            JwtConfig(f"https://{tenant.project_name}.example", "memql", secret, None),
        )
    return tenant, secret
