"""The suite's embedded PostgreSQL and its two databases, one per world (`tests.fix_embedders`):
one written with the deterministic `HashEmbedder`, one with the real model. A module's
`database_url` is that of its world, so a test never mixes vectors of two spaces. Each is
started the first time a test needs it.

`--reads-on-standby` runs the suite on a primary with a hot standby instead, and every memql
the tests start reads on the standby (as `MEMQL_READ_DATABASE_URL` would).

memql is imported inside the fixtures, so loading this plugin costs `tests/unit` nothing.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.fix_embedders import uses_model

if TYPE_CHECKING:
    import psycopg

    from memql.settings import Settings


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reads-on-standby",
        action="store_true",
        help="run on a primary with a hot standby (memql.testing.standby), every memql the"
        " tests start reading on the standby (as MEMQL_READ_DATABASE_URL would)",
    )
    parser.addoption(
        "--citus",
        action="store_true",
        help="run on a Citus cluster (memql.testing.citus: a coordinator and 2 workers on"
        " loopback, Citus built by scripts/build-citus.sh when its cache is absent), every"
        " database distributed by `memql migrate`",
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
def data_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="memql-test-"))


@pytest.fixture(scope="session")
async def postgres(data_dir: Path, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """The embedded PostgreSQL, started as the app starts it; the URL of the database the
    deterministic embedder writes. With `--reads-on-standby`: a primary and its hot standby
    instead, and every memql started on a database of the primary reads on the standby."""
    from memql import runtime
    from memql.settings import Settings

    if request.config.getoption("--citus"):
        async for url in _on_citus(data_dir):
            yield url
        return
    if not request.config.getoption("--reads-on-standby"):
        async with runtime.open_database(Settings(data_dir=data_dir)) as url:
            yield url
        return

    from memql.testing.standby import StandbyPair

    pair = await asyncio.to_thread(StandbyPair, data_dir / "replicated")
    patch = pytest.MonkeyPatch()

    def read_url(settings: Settings, url: str) -> str | None:
        on_primary = f"127.0.0.1:{pair.primary_port}/" in url
        return settings.read_database_url or (pair.on_standby(url) if on_primary else None)

    patch.setattr(runtime, "read_url", read_url)
    try:
        async with runtime.open_database(Settings(database_url=pair.primary_url)) as url:
            yield url
    finally:
        patch.undo()
        await asyncio.to_thread(pair.stop)


async def _on_citus(data_dir: Path) -> AsyncIterator[str]:
    """A Citus cluster for the run; every database of a test made on each of its nodes."""
    from memql import runtime
    from memql.settings import Settings
    from memql.testing import database
    from memql.testing.citus import CitusCluster

    cluster = await asyncio.to_thread(CitusCluster, data_dir / "citus")

    async def create(url: str, name: str) -> str:
        return await asyncio.to_thread(cluster.create_database, name)

    async def drop(url: str, name: str) -> None:
        await asyncio.to_thread(cluster.drop_database, name)

    patch = pytest.MonkeyPatch()
    patch.setattr(database, "create_database", create)
    patch.setattr(database, "drop_database", drop)
    patch.setenv("MEMQL_TEST_CITUS_WORKDIR", str(cluster.workdir))
    try:
        async with runtime.open_database(Settings(database_url=cluster.coordinator_url)) as url:
            yield url
    finally:
        patch.undo()
        await asyncio.to_thread(cluster.stop)


@pytest.fixture(scope="session")
async def model_postgres(postgres: str) -> AsyncIterator[str]:
    """The database the real model writes, on the same server."""
    from memql.testing import fresh_database

    async with fresh_database(postgres) as url:
        yield url


@pytest.fixture(scope="module")
def database_url(request: pytest.FixtureRequest) -> str:
    """The database of the module's world."""
    return str(request.getfixturevalue("model_postgres" if uses_model(request) else "postgres"))


@pytest.fixture(scope="module")
def read_database_url(database_url: str) -> str:
    """Where a memql started on `database_url` reads recall, lists, blocks and counts: the
    database itself, or its standby with `--reads-on-standby`."""
    from memql import runtime
    from memql.settings import Settings

    return runtime.read_url(Settings(database_url=database_url), database_url) or database_url


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A direct connection, for setting up projects and checking what the database holds."""
    from memql.db.pool import owner_connection

    async with await owner_connection(database_url, autocommit=True) as conn:
        yield conn
