"""The embedded PostgreSQL reads memql's settings (`memql.conf` in its directory) from its very
first start, and keeps what an operator wrote there."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from memql.db import embedded
from memql.db.embedded import (
    CONF,
    INCLUDE,
    EmbeddedDatabase,
    machine_memory,
    shared_buffers_mb,
)

GIB = 1024**3


def test_the_page_cache_is_an_eighth_of_memory_within_bounds():
    assert shared_buffers_mb(None) == 128
    assert shared_buffers_mb(512 * 1024**2) == 128
    assert shared_buffers_mb(4 * GIB) == 512
    assert shared_buffers_mb(64 * GIB) == 1024


def shared_buffers_of(data_dir: Path) -> int:
    """The running server's shared_buffers, in MB (started and released here)."""
    database = EmbeddedDatabase(data_dir)
    try:
        with psycopg.connect(database.url) as conn:
            row = conn.execute(
                "select pg_size_bytes(current_setting('shared_buffers')) / 1048576"
            ).fetchone()
            assert row is not None
            return int(row[0])
    finally:
        database.release()


async def test_a_new_server_starts_with_memql_settings_and_keeps_edits(tmp_path):
    assert await asyncio.to_thread(shared_buffers_of, tmp_path) == shared_buffers_mb(
        machine_memory()
    )
    # an operator's value survives the next start, and the include is not added twice
    pgdata = tmp_path / "pg"
    (pgdata / CONF).write_text("shared_buffers = '160MB'\n")
    assert await asyncio.to_thread(shared_buffers_of, tmp_path) == 160
    lines = (pgdata / "postgresql.conf").read_text().splitlines()
    assert lines.count(INCLUDE) == 1


async def test_a_directory_memql_cannot_write_keeps_the_defaults(tmp_path, caplog, monkeypatch):
    def read_only(pgdata: Path) -> None:
        raise PermissionError(f"[Errno 30] Read-only file system: '{pgdata / CONF}'")

    monkeypatch.setattr(embedded, "_configure", read_only)
    assert await asyncio.to_thread(shared_buffers_of, tmp_path) == 128
    assert "keeps its default settings" in caplog.text
    assert not (tmp_path / "pg" / CONF).exists()
