"""A small graphql-transport-ws client over real websockets, for subscription tests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import websockets

MEMORY_EVENTS = """
subscription Events($scope: MemoryScope, $since: String) {
  memoryEvents(scope: $scope, since: $since) {
    cursor type scope memoryId occurredAt
    memory { id content invalidatedAt invalidationReason }
  }
}
"""


class StreamEnded(Exception):
    """The server ended the subscription; `errors` holds what it said, if anything."""

    def __init__(self, errors: list[dict[str, Any]] | None) -> None:
        super().__init__(errors)
        self.errors = errors or []

    @property
    def code(self) -> str | None:
        return self.errors[0].get("extensions", {}).get("code") if self.errors else None


class EventSubscription:
    """One `memoryEvents` subscription on its own websocket connection."""

    def __init__(
        self,
        base_url: str,
        key: str,
        user: str,
        *,
        scope: str | None = None,
        since: str | None = None,
        query: str = MEMORY_EVENTS,
    ) -> None:
        self.url = base_url.replace("http://", "ws://") + "/graphql"
        self.query = query
        self.init = {"Authorization": f"Bearer {key}", "X-User-Id": user}
        self.variables = {"scope": scope, "since": since}
        self.ws: Any = None

    async def __aenter__(self) -> EventSubscription:
        self.ws = await websockets.connect(
            self.url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")]
        )
        await self.ws.send(json.dumps({"type": "connection_init", "payload": self.init}))
        ack = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
        assert ack["type"] == "connection_ack", ack
        await self.ws.send(
            json.dumps(
                {
                    "id": "1",
                    "type": "subscribe",
                    "payload": {"query": self.query, "variables": self.variables},
                }
            )
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()

    async def next(self, wait: float = 10.0) -> dict[str, Any]:
        """The next event; raises StreamEnded when the server ends the stream."""
        while True:
            message = json.loads(await asyncio.wait_for(self.ws.recv(), wait))
            kind = message["type"]
            if kind == "ping":
                await self.ws.send(json.dumps({"type": "pong"}))
                continue
            if kind == "next":
                payload = message["payload"]
                if payload.get("errors"):
                    raise StreamEnded(payload["errors"])
                event: dict[str, Any] = payload["data"]["memoryEvents"]
                return event
            if kind == "error":
                raise StreamEnded(message["payload"])
            if kind == "complete":
                raise StreamEnded(None)

    async def take(self, count: int, within: float = 20.0) -> list[dict[str, Any]]:
        """Exactly `count` events, waiting at most `within` seconds for all of them."""
        events: list[dict[str, Any]] = []
        async with asyncio.timeout(within):
            while len(events) < count:
                events.append(await self.next(within))
        return events

    async def quiet(self, seconds: float = 1.0) -> list[dict[str, Any]]:
        """Whatever arrives within `seconds` (used to prove nothing more comes)."""
        extra: list[dict[str, Any]] = []
        try:
            while True:
                extra.append(await self.next(seconds))
        except TimeoutError:
            return extra
