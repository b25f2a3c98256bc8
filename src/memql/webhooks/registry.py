"""Registering, listing and removing a project's webhook endpoints: one set of rules for the
operator's CLI and for server credentials over GraphQL."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from memql.db import webhooks as db
from memql.db.pool import Conn
from memql.errors import BadInput
from memql.model import EVENT_TYPES, Webhook
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
