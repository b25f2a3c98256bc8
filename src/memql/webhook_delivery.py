"""The deliverer: every project's events, from the log, POSTed to the project's endpoints.

One deliverer is active across all instances: the holder of a PostgreSQL advisory lock on its
own connection (the others ask again every `poll` seconds and take over when the holder's
connection ends). It listens to the notification every event sends (`memql_events`, as the
relay does), with a poll as a fallback, and keeps each project's *final* cursor: its committed
counter (cursors count per project, `db.events`), up to which every event of the project has
committed, so an endpoint never passes an event whose transaction commits late.

Each endpoint has its own worker that reads the endpoint's events after its last acknowledged
cursor (`acked_cursor`, in the database) up to its project's final cursor, and POSTs them one
at a time,
in cursor order. A 2xx answer acknowledges the event and moves `acked_cursor`; anything else
(another status, a timeout, a refused address) is a failure: the worker waits with exponential
backoff and tries the same event again, reading it anew from the log. A failing endpoint only
delays itself.

An attempt (resolving the name, connecting, sending, the answer's status and headers) has one
deadline in all, not a timeout per read that a receiver answering a byte at a time restarts;
and it holds one of the deliverer's connections, shared between projects (`shares.Shares`): a
project's slow receivers hold at most its share, never the connections every other project
needs. A restart, a failover or a removed-and-restored database resumes every endpoint
after its `acked_cursor`, so each event arrives at least once; receivers drop repeats by cursor.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg

from memql import spans
from memql.db import events as db_events
from memql.db import webhooks as db
from memql.db.pool import system_connection
from memql.graphql import webhook_payload as payload
from memql.leadership import Supervised, take_lock
from memql.model import MemoryEvent, Webhook
from memql.settings import Settings
from memql.webhooks import signing, targets
from memql.webhooks.backoff import Backoff
from memql.webhooks.shares import Shares

log = logging.getLogger(__name__)

# held (session level) by the one deliverer that POSTs; a constant shared by every instance
DELIVERY_LOCK = 0x6D656D716C_02
ENDPOINTS_CHANNEL = "memql_webhooks"
# events read from the log at a time, for one endpoint
PAGE = 100
# seconds a page read from the log may be sent from before it is read again
FRESH = 1.0
# seconds between reloads of the endpoint list when no notification says it changed
RELOAD_EVERY = 5.0
USER_AGENT = "memql-webhooks"
ERROR_CHARS = 500


class Deliverer(Supervised):
    label = "webhook delivery"

    def __init__(
        self,
        database_url: str,
        *,
        allow_private: bool = False,
        timeout: float = 10.0,
        backoff: Backoff | None = None,
        poll: float = 0.5,
        connections: int = 100,
        project_connections: int = 10,
    ) -> None:
        super().__init__()
        self._url = database_url
        self._allow_private = allow_private
        self._timeout = timeout
        self._connections = connections
        self._project_connections = project_connections
        self.shares = Shares(connections, project_connections)
        self._backoff = backoff or Backoff()
        self._poll = poll
        # per project: every event of it up to here has committed
        self._final: dict[uuid.UUID, int] = {}
        self._workers: dict[uuid.UUID, _Worker] = {}
        self._reload = True

    @classmethod
    def from_settings(cls, settings: Settings, database_url: str) -> Deliverer:
        return cls(
            database_url,
            allow_private=settings.webhooks_allow_private,
            timeout=settings.webhooks_timeout,
            backoff=Backoff(settings.webhooks_backoff_min, settings.webhooks_backoff_max),
            connections=settings.webhooks_connections,
            project_connections=settings.webhooks_project_connections,
        )

    def final(self, project_id: uuid.UUID) -> int:
        return self._final.get(project_id, 0)

    def state(self) -> dict[str, Any]:
        return {"role": self.role, "endpoints": len(self._workers)}

    def stood_down(self) -> None:
        self._workers.clear()

    async def lead(self) -> None:
        async with (
            await system_connection(self._url, autocommit=True) as conn,
            await system_connection(self._url, autocommit=True) as work,
            httpx.AsyncClient(
                timeout=self._timeout,
                follow_redirects=False,
                # a proxy from the environment would connect to the host again, unchecked
                trust_env=False,
                headers={"User-Agent": USER_AGENT},
                # the shares bound the connections in use; the pool must never make an attempt
                # wait (its wait would be shared by every project)
                limits=httpx.Limits(
                    max_connections=None, max_keepalive_connections=self._connections
                ),
                # headers and body go out as two writes: without NODELAY the body waits for
                # the receiver's delayed ACK (40 ms on Linux)
                transport=httpx.AsyncHTTPTransport(
                    socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
                ),
            ) as http,
        ):
            await take_lock(conn, DELIVERY_LOCK, self._poll)
            await db_events.listen(conn)
            await conn.execute(f"listen {ENDPOINTS_CHANNEL}")
            # an acknowledgement lost in a crash only means that event is sent again (at least
            # once): not worth a disk flush per delivered event
            await work.execute("set synchronous_commit to off")
            self._final = await db_events.counters(conn)
            self.role = "leader"
            log.info("webhook deliverer %s leads", self.name)
            async with asyncio.TaskGroup() as workers:
                await self._follow_log(conn, work, http, workers)

    async def _follow_log(
        self,
        conn: psycopg.AsyncConnection[Any],
        work: psycopg.AsyncConnection[Any],
        http: httpx.AsyncClient,
        workers: asyncio.TaskGroup,
    ) -> None:
        reloaded = 0.0
        notified: set[uuid.UUID] | None = None
        while True:
            if self._reload or time.monotonic() - reloaded > RELOAD_EVERY:
                self._reload = False
                reloaded = time.monotonic()
                await self._sync_workers(work, http, workers)
            if self._workers:
                # one small read per wake, of the projects notified (of all on a quiet poll):
                # the counters say which projects moved
                final = await db_events.counters(conn, notified)
                moved = {p for p, last in final.items() if last > self._final.get(p, 0)}
                self._final.update(final)
                for worker in self._workers.values():
                    if worker.webhook.project_id in moved:
                        worker.wake.set()
            # as the relay does (realtime/relay.py): the backlog wakes this at once
            notified = await self._notified(conn)

    async def _notified(self, conn: psycopg.AsyncConnection[Any]) -> set[uuid.UUID] | None:
        """Wait for the next notifications, or the poll; the projects they name, or None to
        read every project's counter."""
        notifies = await db_events.notified(conn, self._poll)
        if any(n.channel == ENDPOINTS_CHANNEL for n in notifies):
            self._reload = True
        return db_events.moved_projects(notifies) or None

    async def _sync_workers(
        self,
        work: psycopg.AsyncConnection[Any],
        http: httpx.AsyncClient,
        workers: asyncio.TaskGroup,
    ) -> None:
        """Start a worker for each new endpoint; stop those of removed ones."""
        current = {w.id: (w, secret) for w, secret in await db.delivery_targets(work)}
        for webhook_id in list(self._workers):
            if webhook_id not in current:
                self._workers.pop(webhook_id).task.cancel()
        for webhook_id, (webhook, secret) in current.items():
            if webhook_id not in self._workers:
                worker = _Worker(self, work, http, webhook, secret)
                worker.task = workers.create_task(worker.run(), name=f"memql-webhook-{webhook_id}")
                self._workers[webhook_id] = worker

    # --- one attempt ----------------------------------------------------------------------

    async def post(
        self, http: httpx.AsyncClient, webhook: Webhook, secret: str, event: MemoryEvent
    ) -> str | None:
        """POST one event; None when the receiver acknowledged it, else what went wrong. The
        whole attempt, from resolving the name to the answer's headers, has `timeout` seconds."""
        attributes: dict[str, str | int] = {
            "memql.webhook.id": str(webhook.id),
            "memql.event.cursor": event.cursor,
            "memql.event.type": event.type,
            "http.request.method": "POST",
        }
        with spans.span("memql.webhook.deliver", attributes, client=True):
            try:
                # wait_for runs the attempt as a task of its own: httpx's shielded clean-up can
                # eat a cancellation that `asyncio.timeout` counts on, and the worker (cancelled
                # when the deliverer stops) would go on delivering
                error = await asyncio.wait_for(
                    self._attempt(http, webhook, secret, event), self._timeout
                )
            except TimeoutError:
                error = f"no answer within {self._timeout:g} s"
            if error is not None:
                spans.failed(error)
            return error

    async def _attempt(
        self, http: httpx.AsyncClient, webhook: Webhook, secret: str, event: MemoryEvent
    ) -> str | None:
        try:
            target = targets.parse(webhook.url)
            address = (await targets.checked_addresses(target, allow_private=self._allow_private))[
                0
            ]
        except targets.TargetRefused as exc:
            return f"refused: {exc}"
        spans.set_attribute("server.address", target.host)
        body = payload.body(event)
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            signing.TIMESTAMP_HEADER: str(timestamp),
            signing.SIGNATURE_HEADER: signing.signature(secret, timestamp, body),
            "Memql-Webhook-Id": str(webhook.id),
            "Memql-Event-Cursor": str(event.cursor),
            "Memql-Event-Type": event.type,
        }
        # the delivery's span (`traceparent`), so a receiver's work joins its trace
        spans.inject(headers)
        # connect to the address just checked, not to whatever the name resolves to next
        url = httpx.URL(target.url)
        headers["Host"] = url.netloc.decode("ascii")
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        try:
            async with http.stream(
                "POST",
                url.copy_with(host=str(address)),
                content=body,
                headers=headers,
                extensions=extensions,
            ) as response:
                spans.set_attribute("http.response.status_code", response.status_code)
                if 200 <= response.status_code < 300:
                    return None
                return f"HTTP {response.status_code}"
        except httpx.TimeoutException:
            return f"no answer within {self._timeout:g} s"
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"[:ERROR_CHARS] or type(exc).__name__

    def backoff(self, failures: int) -> float:
        return self._backoff.delay(failures)


class _Worker:
    """Delivers one endpoint's events in cursor order, one in flight at a time."""

    def __init__(
        self,
        deliverer: Deliverer,
        work: psycopg.AsyncConnection[Any],
        http: httpx.AsyncClient,
        webhook: Webhook,
        secret: str,
    ) -> None:
        self.deliverer = deliverer
        self.work = work
        self.http = http
        self.webhook = webhook
        self.secret = secret
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None]

    async def run(self) -> None:
        acked = self.webhook.acked_cursor
        # every event of this endpoint up to here was delivered (or is not one of its types)
        scanned = acked
        failures = self.webhook.failures
        # events after `acked` read from the log at `read_at`: all of them up to `page_final`
        # when `complete`
        page: deque[MemoryEvent] = deque()
        page_final, complete, read_at = acked, False, 0.0
        project_id = self.webhook.project_id
        while True:
            if not page:
                if complete:
                    scanned = max(scanned, page_final)
                complete = False
                if scanned >= self.deliverer.final(project_id):
                    self.wake.clear()
                    if self.deliverer.final(project_id) <= scanned:
                        await self.wake.wait()
                    continue
            async with self.deliverer.shares.hold(project_id):
                # Read under the slot: waiting for one may take longer than a page stays fresh,
                # and what was erased since it was read must not go out.
                if not page or time.monotonic() - read_at > FRESH:
                    page_final = self.deliverer.final(project_id)
                    events = await db.pending_events(
                        self.work, self.webhook.id, acked, page_final, PAGE
                    )
                    read_at = time.monotonic()
                    # a full page may have more behind it
                    page, complete = deque(events), len(events) < PAGE
                    if not page:
                        continue
                event = page[0]
                error = await self.deliverer.post(self.http, self.webhook, self.secret, event)
            if error is None:
                await db.record_delivery(self.work, self.webhook.id, event.cursor)
                acked, failures = event.cursor, 0
                page.popleft()
                continue
            page.clear()
            complete = False
            failures += 1
            delay = self.deliverer.backoff(failures)
            log.info(
                "webhook %s: event %s not delivered (%s); next attempt in %.1fs",
                self.webhook.id,
                event.cursor,
                error,
                delay,
            )
            await db.record_failure(
                self.work,
                self.webhook.id,
                error[:ERROR_CHARS],
                datetime.now(UTC) + timedelta(seconds=delay),
            )
            await asyncio.sleep(delay)
