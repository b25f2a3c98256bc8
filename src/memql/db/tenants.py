"""SQL of projects (tenants, their entitlement and browser-token trust) and their API keys.

These tables carry no memories: authentication reads them before a principal exists.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.rows import dict_row

from memql.db.pool import Conn
from memql.model import ApiKey, Consumer, JwtConfig, Project


def _project(row: dict[str, Any]) -> Project:
    return Project(row["id"], row["name"], row["memory_enabled"], row["created_at"])


async def create_project(conn: Conn, name: str) -> Project | None:
    """The new project; None when the name is taken."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "insert into projects (name) values (%s) on conflict (name) do nothing"
            " returning id, name, memory_enabled, created_at",
            (name,),
        )
        row = await cur.fetchone()
    return _project(row) if row is not None else None


async def list_projects(conn: Conn) -> list[Project]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("select id, name, memory_enabled, created_at from projects order by name")
        return [_project(r) for r in await cur.fetchall()]


async def get_project_by_name(conn: Conn, name: str) -> Project | None:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "select id, name, memory_enabled, created_at from projects where name = %s", (name,)
        )
        row = await cur.fetchone()
    return _project(row) if row else None


#: what a key that `find_api_key` does not find is told, whichever the reason: unknown, revoked
#: and expired keys get one answer
KEY_REFUSED = "the API key is unknown, revoked or expired"

# a key that has not expired (`k`: api_keys)
UNEXPIRED = "(k.expires_at is null or k.expires_at > now())"

_KEY_COLUMNS = """
    k.id, k.project_id, p.name as project_name, k.prefix, k.consumer, k.created_at,
    k.last_used_at, k.revoked_at, k.name, k.expires_at
"""


def _api_key(row: dict[str, Any]) -> ApiKey:
    return ApiKey(
        id=row["id"],
        project_id=row["project_id"],
        project_name=row["project_name"],
        prefix=row["prefix"],
        consumer=Consumer(row["consumer"]),
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        revoked_at=row["revoked_at"],
        name=row["name"],
        expires_at=row["expires_at"],
    )


async def insert_api_key(
    conn: Conn,
    project_id: uuid.UUID,
    prefix: str,
    key_hash: bytes,
    consumer: Consumer,
    *,
    name: str | None = None,
    expires: datetime | timedelta | None = None,
) -> ApiKey:
    """A new key. `expires`: an instant, or a time from the database's now (its clock decides
    when a key has expired); None: never."""
    at = expires if isinstance(expires, datetime) else None
    after = expires if isinstance(expires, timedelta) else None
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"""
            with k as (
                insert into api_keys (project_id, prefix, key_hash, consumer, name, expires_at)
                values (%s, %s, %s, %s, %s, coalesce(%s::timestamptz, now() + %s::interval))
                returning *
            )
            select {_KEY_COLUMNS} from k join projects p on p.id = k.project_id
            """,
            (project_id, prefix, key_hash, consumer.value, name, at, after),
        )
        row = await cur.fetchone()
    assert row is not None
    return _api_key(row)


async def list_api_keys(conn: Conn, project_id: uuid.UUID | None = None) -> list[ApiKey]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"""
            select {_KEY_COLUMNS} from api_keys k join projects p on p.id = k.project_id
            where %(project_id)s::uuid is null or k.project_id = %(project_id)s
            order by p.name, k.created_at
            """,
            {"project_id": project_id},
        )
        return [_api_key(r) for r in await cur.fetchall()]


async def revoke_api_key(conn: Conn, key_id: uuid.UUID) -> bool:
    cur = await conn.execute(
        "update api_keys set revoked_at = now() where id = %s and revoked_at is null", (key_id,)
    )
    return cur.rowcount == 1


async def find_jwt_project(conn: Conn, issuer: str) -> tuple[Project, JwtConfig] | None:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            """
            select id, name, memory_enabled, created_at, jwt_issuer, jwt_audience,
                jwt_hs256_secret, jwt_jwks_url
            from projects where jwt_issuer = %s
            """,
            (issuer,),
        )
        row = await cur.fetchone()
    if row is None:
        return None
    config = JwtConfig(
        row["jwt_issuer"], row["jwt_audience"], row["jwt_hs256_secret"], row["jwt_jwks_url"]
    )
    return _project(row), config


async def set_project_jwt(conn: Conn, name: str, config: JwtConfig | None) -> bool:
    """Trust `config` for browser tokens of project `name` (None: stop trusting any)."""
    cur = await conn.execute(
        """
        update projects set jwt_issuer = %s, jwt_audience = %s, jwt_hs256_secret = %s,
            jwt_jwks_url = %s
        where name = %s
        """,
        (
            config.issuer if config else None,
            config.audience if config else None,
            config.hs256_secret if config else None,
            config.jwks_url if config else None,
            name,
        ),
    )
    return cur.rowcount == 1


async def set_project_entitlement(conn: Conn, name: str, enabled: bool) -> bool:
    cur = await conn.execute(
        "update projects set memory_enabled = %s where name = %s", (enabled, name)
    )
    return cur.rowcount == 1


@dataclass(frozen=True)
class KeyOwner:
    key_id: uuid.UUID
    consumer: Consumer
    project: Project
    expires_at: datetime | None = None


async def find_api_key(conn: Conn, key_hash: bytes) -> KeyOwner | None:
    """The live key with this hash (not revoked, not expired) and its project; marks it used
    (at most once a minute)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"""
            select k.id as key_id, k.consumer, k.expires_at, p.id, p.name, p.memory_enabled,
                p.created_at
            from api_keys k join projects p on p.id = k.project_id
            where k.key_hash = %s and k.revoked_at is null and {UNEXPIRED}
            """,
            (key_hash,),
        )
        row = await cur.fetchone()
    if row is None:
        return None
    await conn.execute("select memql_key_used(%s)", (row["key_id"],))
    return KeyOwner(row["key_id"], Consumer(row["consumer"]), _project(row), row["expires_at"])


async def credential_epoch(conn: Conn) -> int:
    """The credential epoch: raised by every change that could revoke a credential (a key
    revoked, moved, given another consumer or another expiry; a project's entitlement, token
    trust or existence; `013_credential_epoch.sql`, `015_key_names_and_expiry.sql`). Time
    passing raises nothing: a key's expiry travels with the principal instead
    (`Principal.key_expires_at`). A credential confirmed after reading epoch E reflects every
    change up to E."""
    cur = await conn.execute("select epoch from credential_epoch")
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def key_holds(conn: Conn, owner: KeyOwner) -> bool:
    """Whether `owner` (a kept answer of `find_api_key`) is still the whole truth: the key
    live (not revoked, not expired, with the same expiry), of the same project, with the same
    consumer, the project entitled and of the same name (the access policy is asked with the
    consumer and the name)."""
    cur = await conn.execute(
        f"""
        select exists(
            select from api_keys k join projects p on p.id = k.project_id
            where k.id = %s and k.project_id = %s and k.revoked_at is null and p.memory_enabled
              and k.consumer = %s and p.name = %s and {UNEXPIRED}
              and k.expires_at is not distinct from %s
        )
        """,
        (
            owner.key_id,
            owner.project.id,
            owner.consumer.value,
            owner.project.name,
            owner.expires_at,
        ),
    )
    row = await cur.fetchone()
    return bool(row and row[0])


async def jwt_trust_holds(conn: Conn, project: Project, config: JwtConfig) -> bool:
    """Whether the project still trusts exactly `config`, is still entitled and still has
    its name (the access policy is asked with it)."""
    cur = await conn.execute(
        """
        select exists(
            select from projects
            where id = %s and name = %s and memory_enabled and jwt_issuer = %s
              and jwt_audience = %s and jwt_hs256_secret is not distinct from %s
              and jwt_jwks_url is not distinct from %s
        )
        """,
        (
            project.id,
            project.name,
            config.issuer,
            config.audience,
            config.hs256_secret,
            config.jwks_url,
        ),
    )
    row = await cur.fetchone()
    return bool(row and row[0])
