"""`memql serve` fails to start in one line (exit code 2, no traceback) for every mistake a
newcomer makes; a port in use is refused before anything starts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile

import psycopg
import pytest

from memql.testing import ServeProcess, fresh_database
from memql.testing.database import url_for_database

NO_PGVECTOR = "postgresql://postgres@127.0.0.1:5432/postgres"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(**env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("MEMQL_", "DATABASE_"))}
    environ.update({"MEMQL_PORT": str(free_port()), "MEMQL_EMBEDDER": "local", **env})
    return subprocess.run(
        [sys.executable, "-m", "memql.cli", "serve"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=90,
    )


def the_one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "memql ready" not in done.stderr
    told = [line for line in done.stderr.splitlines() if line.startswith("memql: ")]
    told = [line for line in told if "GraphQL (and GraphiQL) at" not in line]
    assert len(told) == 1, done.stderr
    return told[0]


def test_a_dead_postgresql_is_one_line():
    line = the_one_line(serve(DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/x"))
    assert "cannot reach PostgreSQL" in line and "DATABASE_URL" in line


async def test_a_missing_database_is_one_line(postgres):
    line = the_one_line(serve(DATABASE_URL=url_for_database(postgres, "no_such_database")))
    assert "no_such_database" in line and "does not exist" in line


def test_a_postgresql_without_pgvector_is_one_line():
    try:
        psycopg.connect(NO_PGVECTOR, connect_timeout=3).close()
    except psycopg.OperationalError:
        # the machine's own PostgreSQL (without pgvector) is the attack's target; a machine
        # without one has nothing to point memql at, and the embedded server always has pgvector
        pytest.skip(reason="no PostgreSQL without pgvector answers on 127.0.0.1:5432 here")
    assert "no pgvector extension" in the_one_line(serve(DATABASE_URL=NO_PGVECTOR))


def test_a_bad_policy_module_is_one_line():
    line = the_one_line(serve(MEMQL_ACCESS_POLICY="no_such_module:policy"))
    assert "MEMQL_ACCESS_POLICY" in line and "no_such_module" in line


def test_a_bad_data_directory_is_one_line():
    with tempfile.NamedTemporaryFile() as file:
        line = the_one_line(serve(MEMQL_DATA_DIR=f"{file.name}/data"))
    assert "MEMQL_DATA_DIR" in line and "Not a directory" in line


def test_a_port_in_use_is_one_line_before_anything_starts():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(MEMQL_PORT=str(port), DATABASE_URL="postgresql://nobody@127.0.0.1:1/x")
    line = the_one_line(done)
    assert f"port {port}" in line and "MEMQL_PORT" in line
    assert "Waiting for application startup" not in done.stderr  # refused before the start


async def test_ctrl_c_stops_the_server_without_a_traceback(postgres, tmp_path):
    """SIGINT (Ctrl-C at a terminal) after a clean shutdown exits 130, the shell's code for
    an interrupt, without a KeyboardInterrupt traceback under "Finished server process"."""
    # a database of its own: the suite's shared one may already hold another model's vectors
    async with fresh_database(postgres) as url:
        server = ServeProcess.on_database(url, tmp_path)
        try:
            await server.ready()
        finally:
            server.stop()
    log = server.log.read_text()
    assert "Finished server process" in log, log
    assert "Traceback" not in log, log
    assert server.proc.returncode == 130, log
