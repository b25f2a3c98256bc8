"""The `memoryEvents` subscription over graphql-transport-ws, as a transport-free state machine.

It keeps the last cursor it delivered, so a stream that is cut (network, server restart, a
subscriber that fell behind) is opened again with `since` set to it: the caller sees every event
once, in order, across reconnections.
"""

from __future__ import annotations

import json
from typing import Any

from memql.client.errors import (
    MemqlClientError,
    ServiceUnavailable,
    SubscriberBehind,
    Unauthenticated,
    from_graphql_error,
)
from memql.client.types import MEMORY_FIELDS, MemoryEvent
from memql.model import Scope

SUBPROTOCOL = "graphql-transport-ws"

SUBSCRIPTION = f"""
subscription Events($scope: MemoryScope, $since: String) {{
  memoryEvents(scope: $scope, since: $since) {{
    cursor type scope memoryId actorId changedAt memory {{ {MEMORY_FIELDS} }}
  }}
}}
"""

# reconnect waits: grows to the last value and stays there
BACKOFF = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0)


class StreamComplete(Exception):
    """The server ended the subscription normally."""


class EventStream:
    """One logical subscription across any number of connections."""

    def __init__(self, credentials: dict[str, str], scope: Scope | str | None, since: str | None):
        self.credentials = credentials
        self.scope = scope.name if isinstance(scope, Scope) else (scope.upper() if scope else None)
        self.last_cursor = since
        self.failures = 0

    def opening(self) -> list[str]:
        """The messages that open a connection and (re)subscribe from the last cursor."""
        variables = {"scope": self.scope, "since": self.last_cursor}
        return [
            json.dumps({"type": "connection_init", "payload": self.credentials}),
            json.dumps(
                {
                    "id": "events",
                    "type": "subscribe",
                    "payload": {"query": SUBSCRIPTION, "variables": variables},
                }
            ),
        ]

    def receive(self, raw: str | bytes) -> tuple[list[MemoryEvent], str | None]:
        """Events in one message and what to answer, if anything. Raises `StreamComplete`
        at the end, `SubscriberBehind` to resume, other `MemqlClientError`s to give up."""
        message: dict[str, Any] = json.loads(raw)
        kind = message.get("type")
        if kind == "ping":
            return [], json.dumps({"type": "pong"})
        if kind == "connection_ack":
            self.failures = 0
            return [], None
        if kind == "next":
            payload = message.get("payload") or {}
            if payload.get("errors"):
                raise from_graphql_error(payload["errors"][0])
            event = MemoryEvent.from_json(payload["data"]["memoryEvents"])
            self.last_cursor = event.cursor
            return [event], None
        if kind == "error":
            errors = message.get("payload") or [{"message": "subscription refused"}]
            raise from_graphql_error(errors[0])
        if kind == "complete":
            raise StreamComplete
        return [], None

    def resumable(self, error: BaseException) -> bool:
        """Whether to open the stream again after `error` (else it is raised to the caller)."""
        if isinstance(error, SubscriberBehind):
            self.last_cursor = error.since or self.last_cursor
            return True
        if isinstance(error, ServiceUnavailable):
            return True
        return not isinstance(error, MemqlClientError | StreamComplete)

    def next_delay(self) -> float:
        """The wait before the next attempt to reconnect; it grows while attempts fail."""
        self.failures += 1
        return BACKOFF[min(self.failures, len(BACKOFF)) - 1]


def close_error(code: int | None, reason: str) -> MemqlClientError | None:
    """What a websocket close code from the server means, when it is a refusal."""
    if code == 4403:
        return Unauthenticated(reason or "credentials refused", status=code)
    if code in (4400, 4406, 4409, 4429):
        return MemqlClientError(reason or f"closed with {code}", code="BAD_USER_INPUT")
    return None
