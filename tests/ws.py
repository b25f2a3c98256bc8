"""A small graphql-transport-ws client over real websockets, for subscription tests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import websockets

MEMORY_EVENTS = """
subscription Events($scope: MemoryScope, $since: String) {
  memoryEvents(scope: $scope, since: $since) {
    cursor type scope memoryId changedAt
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


async def event_cursor(base_url: str, headers: dict[str, str]) -> str:
    """`viewer { eventCursor }`: a `since` from which a stream gets every later commit."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            "/graphql", json={"query": "{ viewer { eventCursor } }"}, headers=headers
        )
    cursor: str = response.json()["data"]["viewer"]["eventCursor"]
    return cursor


# `since` for a stream of every event committed after the subscription was opened: it reads
# `viewer { eventCursor }` first, so a test need not wait for the server to set the stream up
FROM_NOW = "viewer.eventCursor"


class EventSubscription:
    """One `memoryEvents` subscription on its own websocket connection."""

    def __init__(
        self,
        base_url: str,
        key: str,
        user: str,
        *,
        scope: str | None = None,
        since: str | None = FROM_NOW,
        query: str = MEMORY_EVENTS,
    ) -> None:
        self.base_url = base_url
        self.url = base_url.replace("http://", "ws://") + "/graphql"
        self.query = query
        self.init = {"Authorization": f"Bearer {key}", "X-User-Id": user}
        self.variables = {"scope": scope, "since": since}
        self.ws: Any = None

    async def __aenter__(self) -> EventSubscription:
        if self.variables["since"] == FROM_NOW:
            self.variables["since"] = await event_cursor(self.base_url, self.init)
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
        try:
            async with asyncio.timeout(within):
                while len(events) < count:
                    events.append(await self.next(within))
        except TimeoutError:
            arrived = [e.get("cursor") for e in events]
            raise AssertionError(f"{len(events)} of {count} events arrived: {arrived}") from None
        return events

    async def quiet(self, seconds: float = 1.0) -> list[dict[str, Any]]:
        """Whatever arrives within `seconds` (used to prove nothing more comes)."""
        extra: list[dict[str, Any]] = []
        try:
            while True:
                extra.append(await self.next(seconds))
        except TimeoutError:
            return extra


class WsSession:
    """One websocket connection that runs any operation, on either protocol:
    `graphql-transport-ws` (subscribe/next/complete) or the legacy `graphql-ws`
    (start/data/complete)."""

    def __init__(self, base_url: str, init: dict[str, Any], protocol: str) -> None:
        self.url = base_url.replace("http://", "ws://") + "/graphql"
        self.init = init
        self.protocol = protocol
        self.ws: Any = None
        self._ids = 0

    @property
    def legacy(self) -> bool:
        return self.protocol == "graphql-ws"

    async def __aenter__(self) -> WsSession:
        self.ws = await websockets.connect(
            self.url, subprotocols=[websockets.Subprotocol(self.protocol)]
        )
        await self.ws.send(json.dumps({"type": "connection_init", "payload": self.init}))
        while True:
            ack = json.loads(await asyncio.wait_for(self.ws.recv(), 10))
            if ack["type"] != "ka":
                break
        assert ack["type"] == "connection_ack", ack
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()

    async def start(self, query: str, variables: dict[str, Any] | None = None) -> str:
        """Send an operation; returns its id."""
        self._ids += 1
        op_id = str(self._ids)
        payload = {"query": query, "variables": variables or {}}
        kind = "start" if self.legacy else "subscribe"
        await self.ws.send(json.dumps({"id": op_id, "type": kind, "payload": payload}))
        return op_id

    async def result(self, op_id: str, wait: float = 10.0) -> dict[str, Any]:
        """The next result of operation `op_id`: `{"data": ..., "errors": [...]}`; an `error`
        message comes back as `{"errors": [...]}`; a `complete` with nothing as `{}`."""
        async with asyncio.timeout(wait):
            while True:
                message = json.loads(await self.ws.recv())
                kind = message["type"]
                if kind == "ping":
                    await self.ws.send(json.dumps({"type": "pong"}))
                    continue
                if message.get("id") != op_id:
                    continue
                if kind in ("next", "data"):
                    result: dict[str, Any] = message["payload"]
                    return result
                if kind == "error":
                    errors = message["payload"]
                    return {"errors": errors if isinstance(errors, list) else [errors]}
                if kind == "complete":
                    return {}

    async def run(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run a query or mutation and return its one result."""
        return await self.result(await self.start(query, variables))
