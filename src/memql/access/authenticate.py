"""Turn request headers into a Principal: who is asking, for which project, with which grant.

Two credentials: a server credential (`Authorization: Bearer <API key>` + `X-User-Id`, the
backend acting for that user) and a browser credential (`Authorization: Bearer <JWT>` signed by
the app, whose `sub` is the user; `X-User-Id` is refused beside it). Then entitlement (fail
closed), then the access policy, once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace

from psycopg_pool import AsyncConnectionPool

from memql import metrics
from memql.access.cache import CredentialCache
from memql.access.credentials import bearer_token, hash_key
from memql.access.identity import (
    AUTHORIZATION,
    USER_ID_HEADER,
    canonical_user_id,
    credential_headers,
)
from memql.access.jwt import (
    INVALID_TOKEN,
    JwtVerifier,
    looks_like_jwt,
    unverified_issuer,
)
from memql.access.policy import AccessRequest, Policy, decide, load_policy, per_consumer
from memql.access.rates import RateLimits, TokenBuckets
from memql.db import tenants
from memql.db.session import Sessions
from memql.errors import MemqlError, NotEntitled, Unauthenticated
from memql.model import Consumer, JwtConfig, Principal, Project
from memql.settings import Settings

log = logging.getLogger("memql.access")


def policy_from(settings: Settings) -> Policy:
    if settings.access_policy:
        return load_policy(settings.access_policy)
    return per_consumer(
        {Consumer.CLIENT: settings.client_grant, Consumer.AGENT: settings.agent_grant}
    )


def rates_from(settings: Settings) -> RateLimits | None:
    """The request rates `settings` ask for (MEMQL_RATE_PER_KEY, MEMQL_RATE_PER_PROJECT)."""
    if not (settings.rate_per_key or settings.rate_per_project):
        return None

    def buckets(rate: float) -> TokenBuckets | None:
        return TokenBuckets(rate, rate * settings.rate_burst_seconds) if rate else None

    return RateLimits(buckets(settings.rate_per_key), buckets(settings.rate_per_project))


class Authenticator:
    def __init__(
        self, pool: AsyncConnectionPool, policy: Policy, rates: RateLimits | None = None
    ) -> None:
        """`rates`: each `authenticate` (a request, a websocket operation, an MCP call) takes
        its credential's and its project's token (RateLimited when out of them)."""
        self._sessions = Sessions(pool)
        self._rates = rates
        self._policy = policy
        self._jwt = JwtVerifier()
        # resolved credentials; kept only while `cache.listen` runs (see access/cache.py),
        # otherwise every request resolves its credential in the database
        self.cache: CredentialCache[tenants.KeyOwner | tuple[Project, JwtConfig]] = (
            CredentialCache()
        )

    async def credential_epoch(self) -> int:
        """The credential epoch now (`tenants.credential_epoch`): credentials confirmed after
        this call reflect every change it counts. CredentialsUnavailable when the database
        cannot answer."""
        async with self._sessions.lookup() as conn:
            return await tenants.credential_epoch(conn)

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
            consumer, server, key_id, expires_at = Consumer.CLIENT, False, None, None
        else:
            if not header_user:
                raise Unauthenticated("an API key acts for a user: send `X-User-Id: <user id>`")
            user_id = canonical_user_id(header_user)
            owner = await self._from_key(token)
            project, consumer, key_id = owner.project, owner.consumer, owner.key_id
            server, expires_at = True, owner.expires_at
        if not project.memory_enabled:
            raise NotEntitled("not found")
        if self._rates is not None:
            # a browser token's credential is its user of its project
            self._rates.admit(project.id, key_id or (project.id, user_id))
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
            key_expires_at=expires_at,
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

    async def _from_key(self, token: str) -> tenants.KeyOwner:
        key_hash = hash_key(token)

        async def resolve() -> tenants.KeyOwner | None:
            async with self._sessions.lookup() as conn:
                return await tenants.find_api_key(conn, key_hash)

        async def holds(owner: tenants.KeyOwner | tuple[Project, JwtConfig]) -> bool:
            assert isinstance(owner, tenants.KeyOwner)
            async with self._sessions.lookup() as conn:
                return await tenants.key_holds(conn, owner)

        owner = await self.cache.get(("key", key_hash), resolve, holds)
        if not isinstance(owner, tenants.KeyOwner):
            raise Unauthenticated(tenants.KEY_REFUSED)
        return owner

    async def _from_jwt(self, token: str) -> tuple[Project, str]:
        issuer = unverified_issuer(token)

        async def resolve() -> tuple[Project, JwtConfig] | None:
            async with self._sessions.lookup() as conn:
                return await tenants.find_jwt_project(conn, issuer)

        async def holds(found: tenants.KeyOwner | tuple[Project, JwtConfig]) -> bool:
            assert isinstance(found, tuple)
            async with self._sessions.lookup() as conn:
                return await tenants.jwt_trust_holds(conn, found[0], found[1])

        found = await self.cache.get(("jwt", issuer), resolve, holds)
        if not isinstance(found, tuple):
            raise Unauthenticated(INVALID_TOKEN)
        project, config = found
        return project, await self._jwt.subject(token, config)
