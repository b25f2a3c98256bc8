"""Tenant administration: projects, their API keys, browser-token trust and webhooks. The
command line (`memql projects | keys | webhooks | audit`) and the admin API
(`/admin/graphql`) both call `Admin` and nothing below it, so both check the same rules and
record the same audit.

Every change is recorded in the audit log (`admin_audit`) with who made it (`Actor`), in the
change's own transaction: a change without its record never commits, a refused change
records nothing, and no record holds a secret.
"""

from __future__ import annotations

import getpass
import unicodedata
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from memql.access import credentials
from memql.db import admin as db
from memql.db import tenants
from memql.db import webhooks as db_webhooks
from memql.db.admin import AuditEntry, Deleted, ManagedProject
from memql.db.pool import Conn
from memql.errors import BadInput, Conflict, NotFound
from memql.model import ApiKey, Consumer, JwtConfig, Project, Webhook
from memql.rules.validation import bounded
from memql.service import webhooks as registry

__all__ = ["Actor", "Admin", "AuditEntry", "Deleted", "KeyState", "ManagedProject", "Via"]

PROJECT_NAME_MAX = 100
# an issuer, an audience, a JWKS URL
JWT_TEXT_MAX = 2048
HS256_SECRET_MAX = 4096
ACTOR_MAX = 200
AUDIT_DEFAULT = 50
AUDIT_MAX = 1000


class Via(StrEnum):
    """Through what a change was made."""

    CLI = "cli"
    ADMIN_API = "admin-api"


@dataclass(frozen=True)
class Actor:
    """Who makes a change: an operator of the admin API by its name, or the command line's
    OS user."""

    name: str
    via: Via

    @classmethod
    def command_line(cls) -> Actor:
        """The OS user running the command line (`cli` when the system names none)."""
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = ""
        return cls(name[:ACTOR_MAX] or "cli", Via.CLI)

    @property
    def label(self) -> str:
        return f"operator {self.name} ({self.via.value})"


class Action(StrEnum):
    """What the audit log records, one per kind of change."""

    PROJECT_CREATED = "project.created"
    MEMORY_ENABLED = "project.memory_enabled"
    MEMORY_DISABLED = "project.memory_disabled"
    JWT_TRUSTED = "project.jwt_trusted"
    JWT_UNTRUSTED = "project.jwt_untrusted"
    PROJECT_DELETED = "project.deleted"
    KEY_CREATED = "key.created"
    KEY_REVOKED = "key.revoked"
    WEBHOOK_ADDED = "webhook.added"
    WEBHOOK_REMOVED = "webhook.removed"


class KeyState(StrEnum):
    ACTIVE = "active"
    EXPIRED = "expired"
    REVOKED = "revoked"


def key_state(key: ApiKey, now: datetime) -> KeyState:
    """Revoked, expired (its expiry is `now` or before) or active."""
    if key.revoked_at is not None:
        return KeyState.REVOKED
    if key.expires_at is not None and key.expires_at <= now:
        return KeyState.EXPIRED
    return KeyState.ACTIVE


# ---- the rules of the inputs ------------------------------------------------------------------


def _printable(text: str, argument: str, what: str) -> None:
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in text):
        raise BadInput(
            f"{what} holds no control, format or line-separator characters", argument=argument
        )


def project_name(text: str, argument: str = "name") -> str:
    """A project's name: 1 to 100 characters, no surrounding blanks, none of them a control,
    format or line-separator character. Refused, not trimmed: the name given is the name
    every later command uses."""
    if not 1 <= len(text) <= PROJECT_NAME_MAX or not text.strip():
        raise BadInput(f"a project's name is 1 to {PROJECT_NAME_MAX} characters", argument=argument)
    if text != text.strip():
        raise BadInput("a project's name has no blanks around it", argument=argument)
    _printable(text, argument, "a project's name")
    return text


def _storable(text: str, argument: str) -> str:
    """`text` if the database can be asked about it (no NUL, no lone surrogate): a name looked
    up, which need not follow today's rules for new names to be found."""
    if "\x00" in text or any(unicodedata.category(c) == "Cs" for c in text):
        raise BadInput(f"`{argument}` holds a NUL or a lone surrogate", argument=argument)
    return text


def _jwt_text(value: str, argument: str, limit: int = JWT_TEXT_MAX) -> str:
    if not value.strip() or len(value) > limit:
        raise BadInput(f"`{argument}` is 1 to {limit} characters", argument=argument)
    _printable(value, argument, f"`{argument}`")
    return value


def jwt_config(config: JwtConfig) -> JwtConfig:
    """`config` if a project may trust it: an issuer and an audience, and exactly one key
    source, an HS256 secret or an http(s) JWKS URL."""
    _jwt_text(config.issuer, "issuer")
    _jwt_text(config.audience, "audience")
    if (config.hs256_secret is None) == (config.jwks_url is None):
        raise BadInput("give exactly one of `hs256_secret` and `jwks_url`")
    if config.hs256_secret is not None:
        _jwt_text(config.hs256_secret, "hs256_secret", HS256_SECRET_MAX)
    if config.jwks_url is not None:
        _jwt_text(config.jwks_url, "jwks_url")
        try:
            parts = urlsplit(config.jwks_url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadInput("`jwks_url` is an http:// or https:// URL", argument="jwks_url")
    return config


def key_expiry(expires: datetime | timedelta | None, now: datetime) -> None:
    """A key's expiry: a lifetime of more than nothing, or an instant with its UTC offset after
    `now`; either at most 100 years away."""
    if isinstance(expires, timedelta):
        if not timedelta(0) < expires <= credentials.EXPIRY_MAX:
            raise BadInput(
                "`expires_in_seconds` is more than 0 and at most 100 years",
                argument="expires_in_seconds",
            )
    elif isinstance(expires, datetime):
        if expires.utcoffset() is None:
            raise BadInput("`expires_at` needs its UTC offset (Z, +01:00)", argument="expires_at")
        if expires <= now:
            raise BadInput("`expires_at` is in the past", argument="expires_at")
        if expires - now > credentials.EXPIRY_MAX:
            raise BadInput(
                "`expires_at` is more than 100 years away: leave it out for a key that never"
                " expires",
                argument="expires_at",
            )


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


# ---- the service ------------------------------------------------------------------------------

#: opens one transaction as the schema's owner (`db.admin.pooled`, `db.admin.on_connection`)
Transaction = Callable[[], AbstractAsyncContextManager[Conn]]


class Admin:
    """Tenant administration over `transaction`. Projects are named by their names, keys and
    webhooks by their ids. Every method that changes something takes its `Actor`."""

    def __init__(self, transaction: Transaction, *, allow_private_webhooks: bool) -> None:
        self._transaction = transaction
        self._allow_private = allow_private_webhooks

    # ---- projects

    async def projects(self) -> list[ManagedProject]:
        async with self._transaction() as conn:
            return await db.managed_projects(conn)

    async def project(self, name: str) -> ManagedProject:
        async with self._transaction() as conn:
            return await self._named(conn, name)

    async def create_project(self, actor: Actor, name: str) -> ManagedProject:
        name = project_name(name)
        async with self._transaction() as conn:
            project = await tenants.create_project(conn, name)
            if project is None:
                raise Conflict(f"a project named {name!r} exists already", argument="name")
            await self._record(conn, actor, Action.PROJECT_CREATED, project=project)
            return ManagedProject(project, None)

    async def set_memory(self, actor: Actor, name: str, enabled: bool) -> ManagedProject:
        """Entitle the project to memory, or withdraw it (its endpoints then answer 404)."""
        async with self._transaction() as conn:
            managed = await self._named(conn, name)
            await tenants.set_project_entitlement(conn, managed.project.name, enabled)
            changed = await self._named(conn, name)
            action = Action.MEMORY_ENABLED if enabled else Action.MEMORY_DISABLED
            await self._record(conn, actor, action, project=changed.project)
            return changed

    async def set_jwt(self, actor: Actor, name: str, config: JwtConfig | None) -> ManagedProject:
        """Trust browser tokens of `config`'s issuer (None: trust none)."""
        if config is not None:
            jwt_config(config)
        async with self._transaction() as conn:
            managed = await self._named(conn, name)
            await tenants.set_project_jwt(conn, managed.project.name, config)
            changed = await self._named(conn, name)
            if config is None:
                await self._record(conn, actor, Action.JWT_UNTRUSTED, project=changed.project)
            else:
                detail = {
                    "issuer": config.issuer,
                    "audience": config.audience,
                    # which kind of key, never the secret
                    "key": "hs256" if config.hs256_secret is not None else "jwks",
                    "jwks_url": config.jwks_url,
                }
                await self._record(
                    conn, actor, Action.JWT_TRUSTED, project=changed.project, detail=detail
                )
            return changed

    async def delete_project(self, actor: Actor, name: str) -> Deleted:
        """Delete the project with every version of every memory of it, its events, keys and
        webhooks. Its open streams end; its keys stop working at once."""
        async with self._transaction() as conn:
            await self._named(conn, name)
            deleted = await db.delete_project(conn, name)
            if deleted is None:
                raise NotFound(f"no project named {name!r}", project=name)
            detail = {
                "memory_versions": deleted.memory_versions,
                "api_keys": deleted.api_keys,
                "webhooks": deleted.webhooks,
            }
            await self._record(
                conn, actor, Action.PROJECT_DELETED, project=deleted.project, detail=detail
            )
            return deleted

    # ---- keys

    async def create_key(
        self,
        actor: Actor,
        project: str,
        consumer: Consumer,
        *,
        name: str | None = None,
        expires: datetime | timedelta | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key of `project` and the key itself, which is shown this once. `expires`: an
        instant, or a lifetime from the database's now; None: never."""
        label = credentials.key_name(name) if name is not None else None
        key_expiry(expires, datetime.now(UTC))
        async with self._transaction() as conn:
            owner = (await self._named(conn, project, argument="project")).project
            key = credentials.generate_key()
            record = await tenants.insert_api_key(
                conn,
                owner.id,
                credentials.display_prefix(key),
                credentials.hash_key(key),
                consumer,
                name=label,
                expires=expires,
            )
            detail = {
                "name": record.name,
                "consumer": record.consumer.value,
                "prefix": record.prefix,
                "expires_at": _iso(record.expires_at),
            }
            await self._record(
                conn, actor, Action.KEY_CREATED, project=owner, target=record.id, detail=detail
            )
            return record, key

    async def keys(self, project: str | None = None) -> list[ApiKey]:
        """Every key (of `project`), by project and age, with its last use."""
        async with self._transaction() as conn:
            project_id = None
            if project is not None:
                project_id = (await self._named(conn, project, argument="project")).project.id
            return await tenants.list_api_keys(conn, project_id)

    async def revoke_key(self, actor: Actor, key_id: uuid.UUID) -> ApiKey:
        """Revoke a key that is not revoked yet; it is refused from the next request on, on
        every instance."""
        async with self._transaction() as conn:
            key = await db.revoke_api_key(conn, key_id)
            if key is None:
                raise NotFound(f"no active key {key_id}", argument="id")
            owner = await self._named(conn, key.project_name)
            detail = {"name": key.name, "prefix": key.prefix}
            await self._record(
                conn, actor, Action.KEY_REVOKED, project=owner.project, target=key.id, detail=detail
            )
            return key

    # ---- webhooks

    async def add_webhook(
        self, actor: Actor, project: str, url: str, events: Sequence[str] | None
    ) -> tuple[Webhook, str]:
        """Register an endpoint of `project`; returns it with its signing secret, shown this
        once."""
        _printable(url, "url", "`url`")
        for event in events or ():
            _printable(event, "events", "`events`")
        async with self._transaction() as conn:
            owner = (await self._named(conn, project, argument="project")).project
            webhook, secret = await registry.register(
                conn,
                owner.id,
                url,
                events,
                created_by=actor.label,
                allow_private=self._allow_private,
            )
            detail = {"url": webhook.url, "events": list(webhook.event_types or ()) or None}
            await self._record(
                conn, actor, Action.WEBHOOK_ADDED, project=owner, target=webhook.id, detail=detail
            )
            return webhook, secret

    async def webhooks(self, project: str | None = None, *, pending: bool) -> list[Webhook]:
        """Every endpoint (of `project`); with `pending`, each with the events it has still to
        receive."""
        async with self._transaction() as conn:
            project_id = None
            if project is not None:
                project_id = (await self._named(conn, project, argument="project")).project.id
            return await db_webhooks.list_webhooks(conn, project_id, pending=pending)

    async def remove_webhook(self, actor: Actor, webhook_id: uuid.UUID) -> Webhook:
        async with self._transaction() as conn:
            webhook = await db.delete_webhook(conn, webhook_id)
            if webhook is None:
                raise NotFound(f"no webhook {webhook_id}", argument="id")
            owner = await self._named(conn, webhook.project_name)
            await self._record(
                conn,
                actor,
                Action.WEBHOOK_REMOVED,
                project=owner.project,
                target=webhook.id,
                detail={"url": webhook.url},
            )
            return webhook

    # ---- the audit log

    async def audit(
        self, project: str | None = None, *, first: int | None = None, before: int | None = None
    ) -> list[AuditEntry]:
        """The newest entries (of the project once or now named `project`, before the entry
        `before`), newest first: the `first` of them, 50 by default and 1000 at most."""
        limit = bounded(first, AUDIT_DEFAULT, AUDIT_MAX, field="first")
        if before is not None and not 0 < before < 2**63:
            raise BadInput("`before` is the id of an entry", argument="before")
        if project is not None:
            _storable(project, "project")
        async with self._transaction() as conn:
            return await db.audit_entries(conn, project_name=project, before=before, limit=limit)

    # ---- what the methods share

    async def _named(self, conn: Conn, name: str, *, argument: str = "name") -> ManagedProject:
        found = await db.managed_projects(conn, _storable(name, argument))
        if not found:
            raise NotFound(f"no project named {name!r}", project=name)
        return found[0]

    async def _record(
        self,
        conn: Conn,
        actor: Actor,
        action: Action,
        *,
        project: Project,
        target: uuid.UUID | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        await db.record(
            conn,
            actor=actor.name,
            via=actor.via.value,
            action=action.value,
            project=project,
            target_id=target,
            detail=detail,
        )
