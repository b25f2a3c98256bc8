"""Registering, listing and removing a project's webhook endpoints: one set of rules for the
operator's CLI (`register`) and for server credentials over GraphQL (`Webhooks`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from memql.access import checks
from memql.db import webhooks as db
from memql.db.pool import Conn
from memql.db.session import Sessions
from memql.errors import BadInput, NotFound
from memql.model import EVENT_TYPES, Principal, Webhook
from memql.webhooks import signing, targets

# endpoints one project may have
MAX_PER_PROJECT = 20


def event_types(raw: Sequence[str] | None) -> list[str] | None:
    """The event types an endpoint asks for (None: all), checked against the known ones."""
    if raw is None:
        return None
    chosen = list(dict.fromkeys(t.strip() for t in raw if t.strip()))
    if not chosen:
        raise BadInput("name at least one event type, or leave `events` out for all")
    unknown = [t for t in chosen if t not in EVENT_TYPES]
    if unknown:
        raise BadInput(
            f"unknown event type {', '.join(unknown)}; known: {', '.join(EVENT_TYPES)}",
            argument="events",
        )
    return chosen


async def register(
    conn: Conn,
    project_id: uuid.UUID,
    url: str,
    events: Sequence[str] | None,
    *,
    created_by: str,
    allow_private: bool,
) -> tuple[Webhook, str]:
    """A new endpoint and its signing secret (shown to the caller this once)."""
    types = event_types(events)
    try:
        target = targets.parse(url)
        await targets.checked_addresses(target, allow_private=allow_private)
    except targets.TargetRefused as exc:
        raise BadInput(str(exc), argument="url") from None
    if await db.count_webhooks(conn, project_id) >= MAX_PER_PROJECT:
        raise BadInput(f"a project has at most {MAX_PER_PROJECT} webhook endpoints")
    secret = signing.new_secret()
    webhook = await db.insert_webhook(conn, project_id, target.url, types, secret, created_by)
    return webhook, secret


class Webhooks:
    """The project's endpoints as a server credential manages them (`MemoryService.webhooks`)."""

    def __init__(self, sessions: Sessions, *, allow_private: bool) -> None:
        self._sessions = sessions
        self._allow_private = allow_private

    async def add(
        self, principal: Principal, url: str, events: Sequence[str] | None
    ) -> tuple[Webhook, str]:
        """Register an endpoint of the principal's project; returns it with its signing secret,
        which is not shown again."""
        checks.require_webhook_admin(principal)
        async with self._sessions.system() as conn:
            return await register(
                conn,
                principal.project_id,
                url,
                events,
                created_by=f"api key as {principal.user_id}",
                allow_private=self._allow_private,
            )

    async def endpoints(self, principal: Principal) -> list[Webhook]:
        """The project's endpoints with their delivery state."""
        checks.require_webhook_admin(principal)
        async with self._sessions.system() as conn:
            return await db.list_webhooks(conn, principal.project_id, pending=True)

    async def remove(self, principal: Principal, webhook_id: uuid.UUID) -> None:
        checks.require_webhook_admin(principal)
        async with self._sessions.system() as conn:
            if not await db.delete_webhook(conn, webhook_id, principal.project_id):
                raise NotFound("no such webhook in this project")
