"""SQL of tenant administration beyond `tenants.py` and `webhooks.py`: its transactions, the
projects with the browser-token trust they hold, a project's deletion, and the audit log.

Administration runs as the schema's owner (the database URL's own user), as the command line
always has: on the command line's own connection (`on_connection`) or, for the admin API, on a
pooled connection whose role is the owner's for one transaction (`pooled`). Both translate the
database's failures into the domain's errors here.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from memql.db.pool import Conn
from memql.db.session import DATABASE_AWAY, OUT_OF_TIME
from memql.db.tenants import _KEY_COLUMNS, _api_key
from memql.db.webhooks import _COLUMNS as _WEBHOOK_COLUMNS
from memql.db.webhooks import _webhook, endpoints_changed
from memql.errors import BadInput, Conflict, DeadlineExceeded, NotFound, ServiceUnavailable
from memql.model import ApiKey, JwtConfig, Project, Webhook

ISSUER_TAKEN = "another project trusts browser tokens of that issuer already"
PROJECT_GONE = "the project was deleted meanwhile"


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except pg_errors.UniqueViolation as exc:
        if exc.diag.constraint_name == "projects_jwt_issuer_key":
            raise Conflict(ISSUER_TAKEN) from None
        raise Conflict("that exists already") from None
    except pg_errors.ForeignKeyViolation:
        raise NotFound(PROJECT_GONE) from None
    except pg_errors.CheckViolation as exc:
        raise BadInput(f"a value is out of its bounds ({exc.diag.constraint_name})") from None
    except pg_errors.QueryCanceled:
        raise DeadlineExceeded(OUT_OF_TIME) from None


@asynccontextmanager
async def pooled(pool: AsyncConnectionPool, *, timeout_seconds: float) -> AsyncIterator[Conn]:
    """A transaction as the schema's owner on a connection of `pool`, each statement cancelled
    after `timeout_seconds` (`statement_timeout`). No connection within the pool's wait, or one
    lost, is ServiceUnavailable."""
    conn: Conn | None = None
    try:
        async with pool.connection() as conn, conn.transaction():
            # the pool's connections are `memql_app` (pool.py); back to the login role, the
            # owner, until this transaction ends
            await conn.execute("set local role none")
            await conn.execute(
                "select set_config('statement_timeout', %s, true)",
                (str(max(1, math.ceil(timeout_seconds * 1000))),),
            )
            with _translated():
                yield conn
    except PoolTimeout:
        raise ServiceUnavailable(DATABASE_AWAY) from None
    except psycopg.OperationalError:
        if conn is None or not conn.broken:
            raise
        raise ServiceUnavailable(DATABASE_AWAY) from None


@asynccontextmanager
async def on_connection(conn: Conn) -> AsyncIterator[Conn]:
    """A transaction on `conn`, an owner connection (the command line's)."""
    async with conn.transaction():
        with _translated():
            yield conn


# ---- projects ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManagedProject:
    """A project with the browser tokens it trusts (None: none)."""

    project: Project
    jwt: JwtConfig | None


_PROJECT_COLUMNS = """
    id, name, memory_enabled, created_at, jwt_issuer, jwt_audience, jwt_hs256_secret,
    jwt_jwks_url
"""


def _managed(row: dict[str, Any]) -> ManagedProject:
    project = Project(row["id"], row["name"], row["memory_enabled"], row["created_at"])
    jwt = None
    if row["jwt_issuer"] is not None:
        jwt = JwtConfig(
            row["jwt_issuer"], row["jwt_audience"], row["jwt_hs256_secret"], row["jwt_jwks_url"]
        )
    return ManagedProject(project, jwt)


async def managed_projects(conn: Conn, name: str | None = None) -> list[ManagedProject]:
    """Every project by name (or the one named `name`), with its browser-token trust."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"select {_PROJECT_COLUMNS} from projects"
            " where %(name)s::text is null or name = %(name)s order by name",
            {"name": name},
        )
        return [_managed(r) for r in await cur.fetchall()]


@dataclass(frozen=True)
class Deleted:
    """A deleted project and what went with it."""

    project: Project
    memory_versions: int
    api_keys: int
    webhooks: int


async def delete_project(conn: Conn, name: str) -> Deleted | None:
    """Delete the project `name` with everything of it (every version of every memory, its
    events, keys and webhooks: the foreign keys cascade); None when there is none."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("select id from projects where name = %s for update", (name,))
        found = await cur.fetchone()
        if found is None:
            return None
        # by the project's id: on Citus each count reads the project's one shard (a count
        # over every shard would run on parallel connections, after which Citus refuses the
        # deletion of a reference table's row in the same transaction)
        await cur.execute(
            """
            select
                (select count(*) from memories where project_id = %(id)s) as memories,
                (select count(*) from api_keys where project_id = %(id)s) as keys,
                (select count(*) from webhook_endpoints where project_id = %(id)s) as webhooks
            """,
            {"id": found["id"]},
        )
        counts = await cur.fetchone()
        await cur.execute(
            "delete from projects where name = %s returning id, name, memory_enabled, created_at",
            (name,),
        )
        row = await cur.fetchone()
    if row is None or counts is None:
        return None
    project = Project(row["id"], row["name"], row["memory_enabled"], row["created_at"])
    return Deleted(project, int(counts["memories"]), int(counts["keys"]), int(counts["webhooks"]))


# ---- keys and webhooks ------------------------------------------------------------------------


async def revoke_api_key(conn: Conn, key_id: uuid.UUID) -> ApiKey | None:
    """Revoke a live key (not revoked yet); the key as it is now, or None."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"""
            with k as (
                update api_keys set revoked_at = now()
                where id = %s and revoked_at is null returning *
            )
            select {_KEY_COLUMNS} from k join projects p on p.id = k.project_id
            """,
            (key_id,),
        )
        row = await cur.fetchone()
    return _api_key(row) if row is not None else None


async def delete_webhook(conn: Conn, webhook_id: uuid.UUID) -> Webhook | None:
    """Remove an endpoint; the endpoint as it was, or None."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"""
            with w as (delete from webhook_endpoints where id = %s returning *)
            select {_WEBHOOK_COLUMNS}, null as pending from w join projects p on p.id = w.project_id
            """,
            (webhook_id,),
        )
        row = await cur.fetchone()
    if row is None:
        return None
    await endpoints_changed(conn)
    return _webhook(row)


# ---- the audit log ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditEntry:
    """One change to tenants: when, by whom (`actor`, through `via`: `cli` or `admin-api`),
    what (`action`), to which project and key or webhook (`target_id`), and what was set
    (`detail`, never a secret). The project is named as it was: the record outlives it."""

    id: int
    at: datetime
    actor: str
    via: str
    action: str
    project_id: uuid.UUID | None
    project_name: str | None
    target_id: uuid.UUID | None
    detail: dict[str, Any]


async def record(
    conn: Conn,
    *,
    actor: str,
    via: str,
    action: str,
    project: Project | None,
    target_id: uuid.UUID | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    await conn.execute(
        """
        insert into admin_audit (actor, via, action, project_id, project_name, target_id, detail)
        values (%s, %s, %s, %s, %s, %s, %s)
        """,
        (
            actor,
            via,
            action,
            project.id if project else None,
            project.name if project else None,
            target_id,
            Jsonb(detail or {}),
        ),
    )


async def audit_entries(
    conn: Conn, *, project_name: str | None, before: int | None, limit: int
) -> list[AuditEntry]:
    """The newest `limit` entries (of the project once named `project_name`; older than the
    entry `before`), newest first."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            """
            select id, at, actor, via, action, project_id, project_name, target_id, detail
            from admin_audit
            where (%(project)s::text is null or project_name = %(project)s)
              and (%(before)s::bigint is null or id < %(before)s)
            order by id desc
            limit %(limit)s
            """,
            {"project": project_name, "before": before, "limit": limit},
        )
        return [AuditEntry(**r) for r in await cur.fetchall()]
