"""Plain-SQL migrations, applied in file order, each once, under an advisory lock; on a Citus
coordinator, then the tables' distribution (citus.sql), once."""

from __future__ import annotations

import logging
from importlib import resources
from typing import Any

from psycopg import AsyncConnection

from memql.db.pool import owner_connection
from memql.errors import ConfigurationError

log = logging.getLogger(__name__)

# any constant shared by every instance; serialises concurrent `migrate` runs
_MIGRATION_LOCK = 0x6D656D716C


# what `migrate` reports when it distributed the tables (a Citus coordinator, the first time)
DISTRIBUTION = "citus_distribution"


def _citus_sql() -> str:
    return (resources.files("memql.db") / "citus.sql").read_text(encoding="utf-8")


async def _distribution_pending(conn: AsyncConnection[Any]) -> bool:
    """This database has Citus and memql's tables are not distributed yet."""
    cur = await conn.execute("select 1 from pg_extension where extname = 'citus'")
    if await cur.fetchone() is None:
        return False
    cur = await conn.execute(
        "select 1 from pg_dist_partition where logicalrelid = 'memories'::regclass"
    )
    return await cur.fetchone() is None


def _migrations() -> list[tuple[str, str]]:
    folder = resources.files("memql.db") / "migrations"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [(f.name.removesuffix(".sql"), f.read_text(encoding="utf-8")) for f in files]


async def migrate(url: str) -> list[str]:
    """Apply pending migrations; return the names applied. Fails clearly without pgvector."""
    applied: list[str] = []
    async with await owner_connection(url, autocommit=True) as conn:
        await conn.execute("select pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
        try:
            cur = await conn.execute("select 1 from pg_available_extensions where name = 'vector'")
            if await cur.fetchone() is None:
                raise ConfigurationError(
                    "this PostgreSQL has no pgvector extension ('vector'): install pgvector on"
                    " the server (https://github.com/pgvector/pgvector#installation), or unset"
                    " DATABASE_URL to use the embedded PostgreSQL, which ships it"
                )
            await conn.execute(
                "create table if not exists schema_migrations ("
                " name text primary key, applied_at timestamptz not null default now())"
            )
            cur = await conn.execute("select name from schema_migrations")
            done = {row[0] for row in await cur.fetchall()}
            for name, sql in _migrations():
                if name in done:
                    continue
                async with conn.transaction():
                    await conn.execute(sql.encode())
                    await conn.execute("insert into schema_migrations (name) values (%s)", (name,))
                log.info("applied migration %s", name)
                applied.append(name)
            if await _distribution_pending(conn):
                async with conn.transaction():
                    await conn.execute(_citus_sql().encode())
                log.info("distributed memql's tables by project (Citus)")
                applied.append(DISTRIBUTION)
        finally:
            await conn.execute("select pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    return applied
