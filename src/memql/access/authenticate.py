"""Turn request headers into a Principal: who is asking, for which project, with which grant."""

from __future__ import annotations

import re
from collections.abc import Mapping

from psycopg_pool import AsyncConnectionPool

from memql.access.credentials import bearer_token, hash_key
from memql.db import repository as repo
from memql.errors import NotEntitled, Unauthenticated
from memql.model import Access, Grant, Principal

USER_ID_HEADER = "x-user-id"
# app user ids are opaque to memql, but they end up in logs and events: keep them printable
_USER_ID = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")

SERVER_KEY_GRANT = Grant(user=Access.READ_WRITE, project=Access.READ_WRITE)


class Authenticator:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        return await authenticate(self._pool, headers)


async def authenticate(pool: AsyncConnectionPool, headers: Mapping[str, str]) -> Principal:
    """Resolve `Authorization: Bearer <api key>` plus `X-User-Id`; raise Unauthenticated."""
    lowered = {k.lower(): v for k, v in headers.items()}
    token = bearer_token(lowered.get("authorization"))
    if token is None:
        raise Unauthenticated("send `Authorization: Bearer <API key>` and `X-User-Id: <user id>`")
    user_id = (lowered.get(USER_ID_HEADER) or "").strip()
    if not user_id:
        raise Unauthenticated("an API key acts for a user: send `X-User-Id: <user id>`")
    if not _USER_ID.match(user_id):
        raise Unauthenticated("`X-User-Id` must be 1..256 printable characters")
    async with pool.connection() as conn:
        owner = await repo.find_api_key(conn, hash_key(token))
    if owner is None:
        raise Unauthenticated("the API key is unknown or revoked")
    if not owner.project.memory_enabled:
        raise NotEntitled("not found")
    return Principal(
        project_id=owner.project.id,
        project_name=owner.project.name,
        user_id=user_id,
        consumer=owner.consumer,
        grant=SERVER_KEY_GRANT,
        server_credential=True,
    )
