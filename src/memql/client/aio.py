"""`AsyncClient`: memql's API for asyncio code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from types import TracebackType
from typing import Self, TypeVar, Unpack

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from memql.client import operations as ops
from memql.client.events import SUBPROTOCOL, EventStream, StreamComplete, close_error
from memql.client.operations import (
    FilterOptions,
    Id,
    ListOptions,
    MemoryInput,
    RecallOptions,
    SaveOptions,
)
from memql.client.transport import (
    DEFAULT_TIMEOUT,
    body,
    credentials,
    graphql_url,
    request_headers,
    result,
    websocket_url,
)
from memql.client.types import (
    Memory,
    MemoryContext,
    MemoryEvent,
    Page,
    RecallHit,
    SaveResult,
    SupersedeResult,
    Viewer,
    Webhook,
)
from memql.model import Kind, Scope

T = TypeVar("T")


class AsyncClient:
    """memql over GraphQL for one user: an API key with the user it acts for, or a JWT.

        async with AsyncClient("http://127.0.0.1:8000", api_key=KEY, user_id="alice") as m:
            await m.save("Prefers tea.", "topical")
            hits = await m.recall("what does alice drink")

    Errors raise `MemqlClientError` subclasses carrying the server's `code`.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        user_id: str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url
        self._credentials = credentials(api_key, user_id, token)
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http is None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def execute(self, operation: ops.Operation[T]) -> T:
        response = await self._http.post(
            graphql_url(self.url), json=body(operation), headers=request_headers(self._credentials)
        )
        return result(operation, response)

    # reading
    async def viewer(self) -> Viewer:
        return await self.execute(ops.viewer())

    async def memory(self, id: Id) -> Memory | None:
        return await self.execute(ops.memory(id))

    async def memories(self, **options: Unpack[ListOptions]) -> Page:
        return await self.execute(ops.memories(**options))

    async def iter_memories(self, **options: Unpack[ListOptions]) -> AsyncIterator[Memory]:
        """Every memory the filters match, page after page."""
        while True:
            page = await self.memories(**options)
            for memory in page.memories:
                yield memory
            if not page.has_next_page:
                return
            options["after"] = page.end_cursor

    async def history(self, id: Id) -> list[Memory]:
        return await self.execute(ops.history(id))

    async def recall(self, query: str, **options: Unpack[RecallOptions]) -> list[RecallHit]:
        return await self.execute(ops.recall(query, **options))

    async def context(
        self,
        query: str | None = None,
        budget: int | None = None,
        **options: Unpack[FilterOptions],
    ) -> MemoryContext:
        return await self.execute(ops.context(query, budget, **options))

    # writing
    async def save(
        self, content: str, kind: Kind | str, **options: Unpack[SaveOptions]
    ) -> SaveResult:
        return await self.execute(ops.save(content, kind, **options))

    async def save_many(self, items: Iterable[MemoryInput]) -> list[SaveResult]:
        return await self.execute(ops.save_many(items))

    async def supersede(
        self,
        new: MemoryInput,
        *,
        id: Id | None = None,
        key: str | None = None,
        scope: Scope | str | None = None,
    ) -> SupersedeResult:
        return await self.execute(ops.supersede(new, id=id, key=key, scope=scope))

    async def retire(
        self, id: Id | None = None, *, key: str | None = None, scope: Scope | str | None = None
    ) -> Memory:
        return await self.execute(ops.retire(id, key=key, scope=scope))

    async def restore(self, id: Id) -> Memory:
        return await self.execute(ops.restore(id))

    async def erase(self, id: Id) -> int:
        return await self.execute(ops.erase(id))

    async def erase_user_memories(self) -> int:
        return await self.execute(ops.erase_user_memories())

    # webhooks (server credentials whose grant reads both scopes)
    async def webhooks(self) -> list[Webhook]:
        return await self.execute(ops.webhooks())

    async def add_webhook(
        self, url: str, events: Iterable[str] | None = None
    ) -> tuple[Webhook, str]:
        """Register an endpoint; returns it with its signing secret (shown only here)."""
        return await self.execute(ops.add_webhook(url, events))

    async def remove_webhook(self, id: Id) -> bool:
        return await self.execute(ops.remove_webhook(id))

    # realtime
    async def events(
        self, scope: Scope | str | None = None, since: str | None = None
    ) -> AsyncIterator[MemoryEvent]:
        """Changes to the memories this user may read, in cursor order, each once: those
        after `since`, or without it every change committed once the iteration has begun (it
        reads the log's position first). After a cut connection it reconnects and resumes
        from the last cursor it yielded."""
        stream = EventStream(self._credentials, scope, since)
        while True:
            try:
                if stream.last_cursor is None:
                    stream.last_cursor = await self.execute(ops.event_cursor())
                async with connect(
                    websocket_url(self.url),
                    subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                ) as ws:
                    for message in stream.opening():
                        await ws.send(message)
                    async for raw in ws:
                        events, reply = stream.receive(raw)
                        if reply is not None:
                            await ws.send(reply)
                        for event in events:
                            yield event
                    refusal = close_error(ws.close_code, ws.close_reason or "")
                    if refusal is not None:
                        raise refusal
            except StreamComplete:
                return
            except (ConnectionClosed, OSError, InvalidStatus, TimeoutError) as exc:
                if isinstance(exc, ConnectionClosed):
                    refusal = close_error(exc.rcvd.code if exc.rcvd else None, "")
                    if refusal is not None:
                        raise refusal from exc
            except Exception as exc:
                if not stream.resumable(exc):
                    raise
            await asyncio.sleep(stream.next_delay())
