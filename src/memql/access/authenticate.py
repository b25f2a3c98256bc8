"""Turn request headers into a Principal: who is asking, for which project, with which grant.

Two credentials: a server credential (`Authorization: Bearer <API key>` + `X-User-Id`, the
backend acting for that user) and a browser credential (`Authorization: Bearer <JWT>` signed by
the app, whose `sub` is the user; `X-User-Id` is refused beside it). Then entitlement (fail
closed), then the access policy, once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from memql import metrics
from memql.access.credentials import bearer_token, hash_key
from memql.access.identity import (
    AUTHORIZATION,
    USER_ID_HEADER,
    canonical_user_id,
    credential_headers,
)
from memql.access.jwt import JwtVerifier, looks_like_jwt, unverified_issuer
from memql.access.policy import AccessRequest, Policy, decide, load_policy, per_consumer
from memql.db import tenants
from memql.db.repository import Conn
from memql.errors import CredentialsUnavailable, MemqlError, NotEntitled, Unauthenticated
from memql.model import Consumer, Principal, Project
from memql.settings import Settings

log = logging.getLogger("memql.access")


def policy_from(settings: Settings) -> Policy:
    if settings.access_policy:
        return load_policy(settings.access_policy)
    return per_consumer(
        {Consumer.CLIENT: settings.client_grant, Consumer.AGENT: settings.agent_grant}
    )


class Authenticator:
    def __init__(self, pool: AsyncConnectionPool, policy: Policy) -> None:
        self._pool = pool
        self._policy = policy
        self._jwt = JwtVerifier()

    async def authenticate(self, headers: Iterable[tuple[str, str]]) -> Principal:
        """`headers`: (name, value) pairs as text, every one the request sent (HTTP transports
        read them with `identity.http_headers`). Raises Unauthenticated, NotEntitled (answered
        as 404), CredentialsUnavailable (answered as 503) or BrokenPolicy."""
        lowered = credential_headers(headers)
        token = bearer_token(lowered.get(AUTHORIZATION))
        if token is None:
            raise Unauthenticated(
                "send `Authorization: Bearer <API key>` with `X-User-Id: <user id>`,"
                " or `Authorization: Bearer <JWT>`"
            )
        header_user = lowered.get(USER_ID_HEADER)
        if looks_like_jwt(token):
            if header_user is not None:
                raise Unauthenticated("a browser token carries its user in `sub`: drop X-User-Id")
            project, subject = await self._from_jwt(token)
            user_id = canonical_user_id(subject)
            consumer, server = Consumer.CLIENT, False
        else:
            if not header_user:
                raise Unauthenticated("an API key acts for a user: send `X-User-Id: <user id>`")
            user_id = canonical_user_id(header_user)
            project, consumer = await self._from_key(token)
            server = True
        if not project.memory_enabled:
            raise NotEntitled("not found")
        grant = await decide(
            self._policy,
            AccessRequest(user_id, consumer.value, project.name, str(project.id)),
        )
        return Principal(
            project_id=project.id,
            project_name=project.name,
            user_id=user_id,
            consumer=consumer,
            grant=grant,
            server_credential=server,
        )

    async def authenticate_many(
        self, credentials: Sequence[Iterable[tuple[str, str]]]
    ) -> list[Principal | MemqlError]:
        """What each set of credential headers is worth now, in order: a Principal or the
        error `authenticate` would raise. Credentials sharing one `Authorization` (an API key
        acting for many users) are resolved once; each user then gets the policy's grant."""
        outcomes: list[Principal | MemqlError | None] = [None] * len(credentials)
        parsed: list[dict[str, str]] = []
        groups: dict[str, list[int]] = {}
        for i, headers in enumerate(credentials):
            try:
                lowered = credential_headers(headers)
            except MemqlError as exc:
                outcomes[i] = exc
                lowered = {}
            parsed.append(lowered)
            if outcomes[i] is None:
                groups.setdefault(lowered.get(AUTHORIZATION) or "", []).append(i)
        for indexes in groups.values():
            first, *rest = indexes
            metrics.CREDENTIAL_RECHECKS.inc()
            try:
                resolved = await self.authenticate(parsed[first].items())
            except MemqlError as exc:
                for i in indexes:
                    outcomes[i] = exc
                continue
            outcomes[first] = resolved
            for i in rest:
                outcomes[i] = await self._as_user(resolved, parsed[i])
        return [o for o in outcomes if o is not None]

    async def _as_user(
        self, resolved: Principal, lowered: dict[str, str]
    ) -> Principal | MemqlError:
        """`resolved` (the same API key) acting for the user of `lowered` credential headers."""
        try:
            if not resolved.server_credential:
                return await self.authenticate(lowered.items())
            user_id = canonical_user_id(lowered.get(USER_ID_HEADER) or "")
            grant = await decide(
                self._policy,
                AccessRequest(
                    user_id,
                    resolved.consumer.value,
                    resolved.project_name,
                    str(resolved.project_id),
                ),
            )
        except MemqlError as exc:
            return exc
        return replace(resolved, user_id=user_id, grant=grant)

    @asynccontextmanager
    async def _lookup(self) -> AsyncIterator[Conn]:
        """A connection to resolve credentials with; a database that cannot answer (within the
        pool's wait, MEMQL_POOL_TIMEOUT_SECONDS) denies."""
        try:
            async with self._pool.connection() as conn:
                yield conn
        except (psycopg.Error, PoolTimeout) as exc:
            log.warning("could not resolve credentials: %s", exc)
            raise CredentialsUnavailable("credentials cannot be checked right now") from None

    async def _from_key(self, token: str) -> tuple[Project, Consumer]:
        async with self._lookup() as conn:
            owner = await tenants.find_api_key(conn, hash_key(token))
        if owner is None:
            raise Unauthenticated("the API key is unknown or revoked")
        return owner.project, owner.consumer

    async def _from_jwt(self, token: str) -> tuple[Project, str]:
        issuer = unverified_issuer(token)
        async with self._lookup() as conn:
            found = await tenants.find_jwt_project(conn, issuer)
        if found is None:
            raise Unauthenticated("no project trusts this token's issuer")
        project, config = found
        return project, await self._jwt.subject(token, config)
