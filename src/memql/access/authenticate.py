"""Turn request headers into a Principal: who is asking, for which project, with which grant.

Two credentials: a server credential (`Authorization: Bearer <API key>` + `X-User-Id`, the
backend acting for that user) and a browser credential (`Authorization: Bearer <JWT>` signed by
the app, whose `sub` is the user; `X-User-Id` is refused beside it). Then entitlement (fail
closed), then the access policy, once.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from memql.access.cache import CredentialCache
from memql.access.credentials import bearer_token, hash_key
from memql.access.jwt import JwtConfig, JwtVerifier, looks_like_jwt, unverified_issuer
from memql.access.policy import AccessRequest, Policy, decide, load_policy, per_consumer
from memql.db import tenants
from memql.db.repository import Conn
from memql.errors import CredentialsUnavailable, NotEntitled, Unauthenticated
from memql.model import Consumer, Principal, Project
from memql.settings import Settings

log = logging.getLogger("memql.access")

USER_ID_HEADER = "x-user-id"
# seconds to wait for a connection to resolve credentials before failing closed (HTTP 503)
LOOKUP_TIMEOUT = 5.0
# app user ids are opaque to memql, but they end up in logs and events: keep them printable
_USER_ID = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")


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
        # resolved credentials; kept only while `cache.listen` runs (see access/cache.py),
        # otherwise every request resolves its credential in the database
        self.cache: CredentialCache[tenants.KeyOwner | tuple[Project, JwtConfig]] = (
            CredentialCache()
        )

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """Raises Unauthenticated, NotEntitled (answered as 404), CredentialsUnavailable
        (answered as 503) or BrokenPolicy."""
        lowered = {k.lower(): v for k, v in headers.items()}
        token = bearer_token(lowered.get("authorization"))
        if token is None:
            raise Unauthenticated(
                "send `Authorization: Bearer <API key>` with `X-User-Id: <user id>`,"
                " or `Authorization: Bearer <JWT>`"
            )
        header_user = lowered.get(USER_ID_HEADER)
        if looks_like_jwt(token):
            if header_user is not None:
                raise Unauthenticated("a browser token carries its user in `sub`: drop X-User-Id")
            project, user_id = await self._from_jwt(token)
            consumer, server, key_id = Consumer.CLIENT, False, None
        else:
            project, consumer, key_id = await self._from_key(token)
            user_id, server = (header_user or "").strip(), True
            if not user_id:
                raise Unauthenticated("an API key acts for a user: send `X-User-Id: <user id>`")
        if not _USER_ID.match(user_id):
            raise Unauthenticated("the user id must be 1..256 printable characters")
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
            key_id=key_id,
        )

    @asynccontextmanager
    async def _lookup(self) -> AsyncIterator[Conn]:
        """A connection to resolve credentials with, each statement its own transaction (no
        BEGIN and COMMIT round trips); a database that cannot answer denies."""
        try:
            async with self._pool.connection(timeout=LOOKUP_TIMEOUT) as conn:
                await conn.set_autocommit(True)
                try:
                    yield conn
                finally:
                    await conn.set_autocommit(False)
        except (psycopg.Error, PoolTimeout) as exc:
            log.warning("could not resolve credentials: %s", exc)
            raise CredentialsUnavailable("credentials cannot be checked right now") from None

    async def _from_key(self, token: str) -> tuple[Project, Consumer, uuid.UUID]:
        key_hash = hash_key(token)

        async def resolve() -> tenants.KeyOwner | None:
            async with self._lookup() as conn:
                return await tenants.find_api_key(conn, key_hash)

        async def holds(owner: tenants.KeyOwner | tuple[Project, JwtConfig]) -> bool:
            assert isinstance(owner, tenants.KeyOwner)
            async with self._lookup() as conn:
                return await tenants.key_holds(conn, owner.key_id, owner.project.id)

        owner = await self.cache.get(("key", key_hash), resolve, holds)
        if not isinstance(owner, tenants.KeyOwner):
            raise Unauthenticated("the API key is unknown or revoked")
        return owner.project, owner.consumer, owner.key_id

    async def _from_jwt(self, token: str) -> tuple[Project, str]:
        issuer = unverified_issuer(token)

        async def resolve() -> tuple[Project, JwtConfig] | None:
            async with self._lookup() as conn:
                return await tenants.find_jwt_project(conn, issuer)

        async def holds(found: tenants.KeyOwner | tuple[Project, JwtConfig]) -> bool:
            assert isinstance(found, tuple)
            async with self._lookup() as conn:
                return await tenants.jwt_trust_holds(conn, found[0].id, found[1])

        found = await self.cache.get(("jwt", issuer), resolve, holds)
        if not isinstance(found, tuple):
            raise Unauthenticated("no project trusts this token's issuer")
        project, config = found
        return project, await self._jwt.subject(token, config)
