"""`Client`: memql's API for synchronous code (scripts, notebooks, worker threads)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Self, TypeVar, Unpack

import httpx
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

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


class Client:
    """memql over GraphQL for one user: an API key with the user it acts for, or a JWT.

        with Client("http://127.0.0.1:8000", api_key=KEY, user_id="alice") as m:
            m.save("Prefers tea.", "topical")
            hits = m.recall("what does alice drink")

    The same methods as `AsyncClient`, without `await`. Errors raise `MemqlClientError`
    subclasses carrying the server's `code`.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        user_id: str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        http: httpx.Client | None = None,
    ) -> None:
        self.url = url
        self._credentials = credentials(api_key, user_id, token)
        self._http = http or httpx.Client(timeout=timeout)
        self._owns_http = http is None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def execute(self, operation: ops.Operation[T]) -> T:
        response = self._http.post(
            graphql_url(self.url), json=body(operation), headers=request_headers(self._credentials)
        )
        return result(operation, response)

    # reading
    def viewer(self) -> Viewer:
        return self.execute(ops.viewer())

    def memory(self, id: Id) -> Memory | None:
        return self.execute(ops.memory(id))

    def memories(self, **options: Unpack[ListOptions]) -> Page:
        return self.execute(ops.memories(**options))

    def iter_memories(self, **options: Unpack[ListOptions]) -> Iterator[Memory]:
        """Every memory the filters match, page after page."""
        while True:
            page = self.memories(**options)
            yield from page.memories
            if not page.has_next_page:
                return
            options["after"] = page.end_cursor

    def history(self, id: Id) -> list[Memory]:
        return self.execute(ops.history(id))

    def recall(self, query: str, **options: Unpack[RecallOptions]) -> list[RecallHit]:
        return self.execute(ops.recall(query, **options))

    def context(
        self,
        query: str | None = None,
        budget: int | None = None,
        **options: Unpack[FilterOptions],
    ) -> MemoryContext:
        return self.execute(ops.context(query, budget, **options))

    # writing
    def save(self, content: str, kind: Kind | str, **options: Unpack[SaveOptions]) -> SaveResult:
        return self.execute(ops.save(content, kind, **options))

    def save_many(self, items: Iterable[MemoryInput]) -> list[SaveResult]:
        return self.execute(ops.save_many(items))

    def supersede(
        self,
        new: MemoryInput,
        *,
        id: Id | None = None,
        key: str | None = None,
        scope: Scope | str | None = None,
    ) -> SupersedeResult:
        return self.execute(ops.supersede(new, id=id, key=key, scope=scope))

    def retire(
        self, id: Id | None = None, *, key: str | None = None, scope: Scope | str | None = None
    ) -> Memory:
        return self.execute(ops.retire(id, key=key, scope=scope))

    def restore(self, id: Id) -> Memory:
        return self.execute(ops.restore(id))

    def erase(self, id: Id) -> int:
        return self.execute(ops.erase(id))

    def erase_user_memories(self) -> int:
        return self.execute(ops.erase_user_memories())

    # webhooks (server credentials whose grant reads both scopes)
    def webhooks(self) -> list[Webhook]:
        return self.execute(ops.webhooks())

    def add_webhook(self, url: str, events: Iterable[str] | None = None) -> tuple[Webhook, str]:
        """Register an endpoint; returns it with its signing secret (shown only here)."""
        return self.execute(ops.add_webhook(url, events))

    def remove_webhook(self, id: Id) -> bool:
        return self.execute(ops.remove_webhook(id))

    # realtime
    def events(
        self, scope: Scope | str | None = None, since: str | None = None
    ) -> Iterator[MemoryEvent]:
        """Changes to the memories this user may read, in cursor order, each once: those
        after `since`, or without it every change committed once the iteration has begun (it
        reads the log's position first). After a cut connection it reconnects and resumes
        from the last cursor it yielded."""
        stream = EventStream(self._credentials, scope, since)
        while True:
            try:
                if stream.last_cursor is None:
                    stream.last_cursor = self.execute(ops.event_cursor())
                with connect(
                    websocket_url(self.url),
                    subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                ) as ws:
                    for message in stream.opening():
                        ws.send(message)
                    for raw in ws:
                        events, reply = stream.receive(raw)
                        if reply is not None:
                            ws.send(reply)
                        yield from events
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
            time.sleep(stream.next_delay())
