"""Turn request headers into a Principal: who is asking, for which project, with which grant.

Two credentials: a server credential (`Authorization: Bearer <API key>` + `X-User-Id`, the
backend acting for that user) and a browser credential (`Authorization: Bearer <JWT>` signed by
the app, whose `sub` is the user; `X-User-Id` is refused beside it). Then entitlement (fail
closed), then the access policy, once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from memql import metrics
from memql.access.credentials import bearer_token, hash_key
from memql.access.jwt import JwtVerifier, looks_like_jwt, unverified_issuer
from memql.access.policy import AccessRequest, Policy, decide, load_policy, per_consumer
from memql.db import tenants
from memql.db.repository import Conn
from memql.errors import CredentialsUnavailable, MemqlError, NotEntitled, Unauthenticated
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
            consumer, server = Consumer.CLIENT, False
        else:
            project, consumer = await self._from_key(token)
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
        )

    async def authenticate_many(
        self, credentials: Sequence[Mapping[str, str]]
    ) -> list[Principal | MemqlError]:
        """What each set of headers is worth now, in order: a Principal or the error
        `authenticate` would raise. Credentials sharing one `Authorization` (an API key acting
        for many users) are resolved once; each user then gets the policy's grant."""
        outcomes: list[Principal | MemqlError | None] = [None] * len(credentials)
        groups: dict[str, list[int]] = {}
        for i, headers in enumerate(credentials):
            lowered = {k.lower(): v for k, v in headers.items()}
            groups.setdefault(lowered.get("authorization") or "", []).append(i)
        for indexes in groups.values():
            first, *rest = indexes
            metrics.CREDENTIAL_RECHECKS.inc()
            try:
                resolved = await self.authenticate(credentials[first])
            except MemqlError as exc:
                for i in indexes:
                    outcomes[i] = exc
                continue
            outcomes[first] = resolved
            for i in rest:
                outcomes[i] = await self._as_user(resolved, credentials[i])
        return [o for o in outcomes if o is not None]

    async def _as_user(
        self, resolved: Principal, headers: Mapping[str, str]
    ) -> Principal | MemqlError:
        """`resolved` (the same API key) acting for the user of `headers`."""
        lowered = {k.lower(): v for k, v in headers.items()}
        user_id = (lowered.get(USER_ID_HEADER) or "").strip()
        if not resolved.server_credential or not _USER_ID.match(user_id):
            try:
                return await self.authenticate(headers)
            except MemqlError as exc:
                return exc
        try:
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
        """A connection to resolve credentials with; a database that cannot answer denies."""
        try:
            async with self._pool.connection(timeout=LOOKUP_TIMEOUT) as conn:
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
