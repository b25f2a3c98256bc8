"""The admin API's schema: its resolvers parse arguments, call `Admin` (service/admin.py) as
the operator, and map the answer. Importing it opens nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import strawberry
from graphql.validation import MaxIntrospectionDepthRule
from strawberry.extensions import AddValidationRules, QueryDepthLimiter
from strawberry.schema.config import StrawberryConfig
from strawberry.types import Info as StrawberryInfo

from memql.access.operators import Operator as Who
from memql.errors import BadInput
from memql.graphql.admin.types import (
    AddedWebhook,
    AddWebhookInput,
    ApiKey,
    AuditEntry,
    CreateApiKeyInput,
    CreatedApiKey,
    DeletedProject,
    JwtTrustInput,
    Operator,
    Project,
    Webhook,
)
from memql.graphql.documents import CachedDocuments, Documents
from memql.graphql.errors import classify
from memql.graphql.shape import max_aliases_rule
from memql.model import JwtConfig
from memql.rules.validation import parse_id
from memql.service.admin import Actor, Admin, ManagedProject, Via

MAX_DEPTH = 6
MAX_ALIASES = 30
MAX_TOKENS = 2000
MAX_DOCUMENT_BYTES = 16 * 1024


@dataclass(frozen=True)
class AdminContext:
    """An operator's request: only one whose token was accepted gets this far."""

    admin: Admin
    operator: Who
    # documents of requests with accepted credentials may be kept (graphql/documents.py)
    authenticated: bool = True

    @property
    def actor(self) -> Actor:
        return Actor(self.operator.name, Via.ADMIN_API)


Info = StrawberryInfo[AdminContext, None]


def _admin(info: Info) -> Admin:
    return info.context.admin


@strawberry.type
class Query:
    @strawberry.field(description="The operator whose token the request carries.")
    def operator(self, info: Info) -> Operator:
        return Operator(name=info.context.operator.name)

    @strawberry.field(description="Every project, by name.")
    async def projects(self, info: Info) -> list[Project]:
        return [Project.from_domain(p) for p in await _admin(info).projects()]

    @strawberry.field(description="The project of this name (NOT_FOUND: none).")
    async def project(self, info: Info, name: str) -> Project:
        return Project.from_domain(await _admin(info).project(name))

    @strawberry.field(description="Every API key (of `project`), by project and age.")
    async def api_keys(self, info: Info, project: str | None = None) -> list[ApiKey]:
        now = datetime.now(UTC)
        return [ApiKey.from_domain(k, now) for k in await _admin(info).keys(project)]

    @strawberry.field(description="Every webhook endpoint (of `project`), with its delivery state.")
    async def webhooks(self, info: Info, project: str | None = None) -> list[Webhook]:
        found = await _admin(info).webhooks(project, pending=True)
        return [Webhook.from_domain(w) for w in found]

    @strawberry.field(
        description="Changes to tenants, newest first (of the project once or now named"
        " `project`; older than the entry `before`): at most `first`, 1 to 1000."
    )
    async def audit_log(
        self,
        info: Info,
        project: str | None = None,
        first: int = 50,
        before: strawberry.ID | None = None,
    ) -> list[AuditEntry]:
        older = None
        if before is not None:
            if not str(before).isdigit() or len(str(before)) > 19:
                raise BadInput("`before` is the id of an entry", argument="before")
            older = int(str(before))
        found = await _admin(info).audit(project, first=first, before=older)
        return [AuditEntry.from_domain(e) for e in found]


@strawberry.type
class Mutation:
    @strawberry.mutation(description="Create a project, entitled to memory.")
    async def create_project(self, info: Info, name: str) -> Project:
        return Project.from_domain(await _admin(info).create_project(info.context.actor, name))

    @strawberry.mutation(
        description="Entitle a project to memory, or withdraw it (its endpoints then answer"
        " 404 and its open streams end)."
    )
    async def set_project_memory(self, info: Info, name: str, enabled: bool) -> Project:
        changed = await _admin(info).set_memory(info.context.actor, name, enabled)
        return Project.from_domain(changed)

    @strawberry.mutation(
        description="Trust browser tokens (JWT) of one issuer for this project, in place of any"
        " it trusted."
    )
    async def set_project_jwt(self, info: Info, name: str, trust: JwtTrustInput) -> Project:
        config = JwtConfig(trust.issuer, trust.audience, trust.hs256_secret, trust.jwks_url)
        return Project.from_domain(await _admin(info).set_jwt(info.context.actor, name, config))

    @strawberry.mutation(description="Trust no browser tokens for this project any more.")
    async def clear_project_jwt(self, info: Info, name: str) -> Project:
        return Project.from_domain(await _admin(info).set_jwt(info.context.actor, name, None))

    @strawberry.mutation(
        description="Delete a project with every version of every memory, its events, keys and"
        " webhooks. There is no undo."
    )
    async def delete_project(self, info: Info, name: str) -> DeletedProject:
        gone = await _admin(info).delete_project(info.context.actor, name)
        return DeletedProject(
            project=Project.from_domain(ManagedProject(gone.project, None)),
            memory_versions=gone.memory_versions,
            api_keys=gone.api_keys,
            webhooks=gone.webhooks,
        )

    @strawberry.mutation(description="Create an API key; the key is in the answer, and only there.")
    async def create_api_key(self, info: Info, input: CreateApiKeyInput) -> CreatedApiKey:
        if input.expires_at is not None and input.expires_in_seconds is not None:
            raise BadInput("give `expiresAt` or `expiresInSeconds`, not both", argument="input")
        expires: datetime | timedelta | None = input.expires_at
        if input.expires_in_seconds is not None:
            expires = timedelta(seconds=input.expires_in_seconds)
        record, key = await _admin(info).create_key(
            info.context.actor, input.project, input.consumer, name=input.name, expires=expires
        )
        return CreatedApiKey(api_key=ApiKey.from_domain(record, datetime.now(UTC)), key=key)

    @strawberry.mutation(description="Revoke a key: refused from the next request on, everywhere.")
    async def revoke_api_key(self, info: Info, id: strawberry.ID) -> ApiKey:
        key_id = parse_id(id, argument="id", what="key id")
        key = await _admin(info).revoke_key(info.context.actor, key_id)
        return ApiKey.from_domain(key, datetime.now(UTC))

    @strawberry.mutation(
        description="Register an endpoint that receives a project's memory events; its signing"
        " secret is in the answer, and only there."
    )
    async def add_webhook(self, info: Info, input: AddWebhookInput) -> AddedWebhook:
        webhook, secret = await _admin(info).add_webhook(
            info.context.actor, input.project, input.url, input.events
        )
        return AddedWebhook(webhook=Webhook.from_domain(webhook), secret=secret)

    @strawberry.mutation(description="Stop delivering to an endpoint and remove it.")
    async def remove_webhook(self, info: Info, id: strawberry.ID) -> Webhook:
        webhook_id = parse_id(id, argument="id", what="webhook id")
        removed = await _admin(info).remove_webhook(info.context.actor, webhook_id)
        return Webhook.from_domain(removed)


class AdminSchema(strawberry.Schema):
    documents: Documents

    def process_errors(self, errors: list[Any], execution_context: Any = None) -> None:
        # expected errors are answers; the unexpected are masked and logged with an id
        for error in errors:
            classify(error)


def build_admin_schema(
    *, introspection: bool = True, max_document_bytes: int = MAX_DOCUMENT_BYTES
) -> AdminSchema:
    """The admin schema, bounded as the main one is: document size, tokens and shape, depth,
    aliases."""
    documents = Documents(max_bytes=max_document_bytes, max_tokens=MAX_TOKENS, max_entries=64)
    rules = [
        *QueryDepthLimiter(max_depth=MAX_DEPTH).validation_rules,
        MaxIntrospectionDepthRule,
        # counts each fragment once, however often it is spread (Strawberry's MaxAliasesLimiter
        # walks it at every spread: exponential in fragments spreading each other)
        max_aliases_rule(MAX_ALIASES),
    ]
    extensions: list[Any] = [
        lambda: AddValidationRules(rules),
        lambda: CachedDocuments(documents),
    ]
    if not introspection:
        from strawberry.extensions import DisableIntrospection

        extensions.append(DisableIntrospection)
    built = AdminSchema(
        query=Query,
        mutation=Mutation,
        extensions=extensions,
        config=StrawberryConfig(disable_field_suggestions=not introspection),
    )
    built.documents = documents
    return built


schema = build_admin_schema()
