"""The admin API's types, built from the domain's objects. No secret is ever a field of one,
except the new key's and the new endpoint's, each in the answer that made it."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry
from strawberry.scalars import JSON

from memql import model
from memql.graphql.types import Consumer, WebhookState
from memql.service import admin


@strawberry.type(description="Who is asking: the operator of the token.")
class Operator:
    name: str = strawberry.field(description="Recorded with every change the operator makes.")


@strawberry.type(description="The browser tokens (JWT) a project trusts; the key is not shown.")
class JwtTrust:
    issuer: str
    audience: str
    key: str = strawberry.field(description="`hs256` (a shared secret) or `jwks` (a JWKS URL).")
    jwks_url: str | None

    @classmethod
    def from_domain(cls, config: model.JwtConfig) -> JwtTrust:
        return cls(
            issuer=config.issuer,
            audience=config.audience,
            key="hs256" if config.hs256_secret is not None else "jwks",
            jwks_url=config.jwks_url,
        )


@strawberry.type(description="A tenant: its memories, keys and webhooks are its own.")
class Project:
    id: strawberry.ID
    name: str
    memory_enabled: bool = strawberry.field(
        description="Entitled to memory; false: its endpoints answer 404."
    )
    created_at: datetime
    jwt: JwtTrust | None = strawberry.field(description="Null: it trusts no browser tokens.")

    @classmethod
    def from_domain(cls, m: admin.ManagedProject) -> Project:
        return cls(
            id=strawberry.ID(str(m.project.id)),
            name=m.project.name,
            memory_enabled=m.project.memory_enabled,
            created_at=m.project.created_at,
            jwt=JwtTrust.from_domain(m.jwt) if m.jwt is not None else None,
        )


@strawberry.type
class DeletedProject:
    project: Project
    memory_versions: int = strawberry.field(description="Every version of every memory, erased.")
    api_keys: int
    webhooks: int


@strawberry.enum(description="Whether a key is accepted.")
class ApiKeyState(Enum):
    ACTIVE = "active"
    EXPIRED = "expired"
    REVOKED = "revoked"


@strawberry.type(description="A project's API key; the key itself was shown once, when made.")
class ApiKey:
    id: strawberry.ID
    project: str
    project_id: strawberry.ID
    prefix: str = strawberry.field(description="The key's first characters, for recognising it.")
    name: str | None
    consumer: Consumer
    created_at: datetime
    last_used_at: datetime | None = strawberry.field(description="Recorded at most once a minute.")
    expires_at: datetime | None
    revoked_at: datetime | None
    state: ApiKeyState

    @classmethod
    def from_domain(cls, k: model.ApiKey, now: datetime) -> ApiKey:
        return cls(
            id=strawberry.ID(str(k.id)),
            project=k.project_name,
            project_id=strawberry.ID(str(k.project_id)),
            prefix=k.prefix,
            name=k.name,
            consumer=k.consumer,
            created_at=k.created_at,
            last_used_at=k.last_used_at,
            expires_at=k.expires_at,
            revoked_at=k.revoked_at,
            state=ApiKeyState(admin.key_state(k, now).value),
        )


@strawberry.type
class CreatedApiKey:
    api_key: ApiKey
    key: str = strawberry.field(
        description="The key, for `Authorization: Bearer <key>`; shown only here."
    )


@strawberry.type(description="An HTTP endpoint that receives a project's memory events.")
class Webhook(WebhookState):
    project: str
    project_id: strawberry.ID
    created_by: str
    pending_count: int | None = strawberry.field(
        description="Events it has still to receive (null where not counted)."
    )

    @classmethod
    def from_domain(cls, w: model.Webhook) -> Webhook:
        return cls(
            **cls.state_of(w),
            project=w.project_name,
            project_id=strawberry.ID(str(w.project_id)),
            created_by=w.created_by,
            pending_count=w.pending,
        )


@strawberry.type
class AddedWebhook:
    webhook: Webhook
    secret: str = strawberry.field(
        description="The key of the HMAC-SHA256 in each POST's Memql-Signature header; shown"
        " only here."
    )


@strawberry.enum(description="Through what a change was made.")
class AuditVia(Enum):
    CLI = "cli"
    ADMIN_API = "admin-api"


@strawberry.type(description="One change to tenants, and who made it.")
class AuditEntry:
    id: strawberry.ID
    at: datetime
    actor: str = strawberry.field(
        description="The operator's name (admin API), or the OS user (command line)."
    )
    via: AuditVia
    action: str = strawberry.field(
        description="`project.created`, `project.memory_enabled`, `project.memory_disabled`,"
        " `project.jwt_trusted`, `project.jwt_untrusted`, `project.deleted`, `key.created`,"
        " `key.revoked`, `webhook.added` or `webhook.removed`."
    )
    project: str | None = strawberry.field(description="The project's name at the time.")
    project_id: strawberry.ID | None
    target_id: strawberry.ID | None = strawberry.field(description="The key or the webhook.")
    detail: JSON = strawberry.field(description="What was set; never a secret.")

    @classmethod
    def from_domain(cls, e: admin.AuditEntry) -> AuditEntry:
        return cls(
            id=strawberry.ID(str(e.id)),
            at=e.at,
            actor=e.actor,
            via=AuditVia(e.via),
            action=e.action,
            project=e.project_name,
            project_id=strawberry.ID(str(e.project_id)) if e.project_id else None,
            target_id=strawberry.ID(str(e.target_id)) if e.target_id else None,
            detail=JSON(e.detail),
        )


@strawberry.input(description="The browser tokens a project trusts: one issuer, one audience.")
class JwtTrustInput:
    issuer: str = strawberry.field(description="The tokens' `iss`.")
    audience: str = strawberry.field(description="The tokens' `aud`.")
    hs256_secret: str | None = strawberry.field(
        default=None, description="A shared HS256 secret; or give `jwksUrl`."
    )
    jwks_url: str | None = strawberry.field(
        default=None, description="Where the app publishes its public keys; or `hs256Secret`."
    )


@strawberry.input
class CreateApiKeyInput:
    project: str = strawberry.field(description="The project's name.")
    consumer: Consumer = Consumer.AGENT
    name: str | None = strawberry.field(
        default=None, description="A label for listings, 1 to 100 characters."
    )
    expires_at: datetime | None = strawberry.field(
        default=None,
        description="Refuse the key from this instant on (with its UTC offset); at most 100"
        " years ahead. Or `expiresInSeconds`; neither: it never expires.",
    )
    expires_in_seconds: int | None = strawberry.field(
        default=None, description="Refuse the key this many seconds after it is made."
    )


@strawberry.input
class AddWebhookInput:
    project: str = strawberry.field(description="The project's name.")
    url: str = strawberry.field(description="http(s) URL that receives one POST per event.")
    events: list[str] | None = strawberry.field(
        default=None, description="Only these event types (`memory.created`, ...); null: all."
    )
