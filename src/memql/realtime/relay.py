"""The relay: the event log, in cursor order per project, onto the broadcast.

Each write's transaction inserts its events, their cursors drawn from the project's counter
(`db.events`); a trigger sends `NOTIFY memql_events '<project id>:<cursor>'`. The relay wakes
on it and reads, in one snapshot, the committed counter of each project notified and its events
above the relay's position for it (of every project every `poll` seconds, as a safety net):
every event up to a committed counter has committed, so nothing read can be overtaken by a
lower cursor. It publishes each event on its project's
channel, in cursor order within the project.

With Redis, one relay is active across all instances: the holder of a PostgreSQL advisory lock
on its own connection (on the primary: never through a read URL or a pooler). When that
connection ends (the process died) another instance takes the lock within `poll` seconds and
resumes, per project, from `relay_positions`, the last cursor known to have reached the
broadcast; subscribers drop the duplicates this may resend.

A subscriber's horizon is its project's committed counter (`horizon`): an event above it
commits after the subscriber read it, so the relay reads and publishes it after that.

In memory (no Redis) each instance relays for itself and keeps its positions in memory,
starting from the counters as they stand when it first leads.

On Citus (`RelayFleet`) a trigger notifies on the worker that holds the project's shard, so one
relay leads per worker group: its lock is taken on the coordinator (`relay_lock(group)`), it
listens on the group's worker and reads, through the coordinator, the projects notified and
(each `poll`) every project whose shard the group holds now. The fleet starts a relay for each
group and for every group added later (a rebalance moves shards onto it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence

import psycopg

from memql import metrics, spans
from memql.db import cluster as db_cluster
from memql.db import events as db_events
from memql.db.cluster import WorkerGroup
from memql.db.pool import system_connection
from memql.leadership import Supervised, running, take_lock
from memql.model import MemoryEvent
from memql.realtime import wire
from memql.realtime.bus import BusUnavailable, EventBus

log = logging.getLogger(__name__)


class Relay(Supervised):
    label = "relay"

    def __init__(
        self,
        database_url: str,
        bus: EventBus,
        *,
        shared: bool,
        batch: int = 500,
        poll: float = 0.5,
        group: WorkerGroup | None = None,
    ) -> None:
        super().__init__()
        self._group = group
        if group is not None:
            self.label = f"relay of group {group.id}"
        self._url = database_url
        self._bus = bus
        # shared: one leader across instances, position in the database
        self._shared = shared
        self._batch = batch
        self._poll = poll
        # local mode: where publishing stands, per project (from the first lead on)
        self._positions: dict[uuid.UUID, int] | None = None
        self._started = asyncio.Event()

    async def horizon(self, conn: psycopg.AsyncConnection, project_id: uuid.UUID) -> int:
        """The cursor up to which a subscriber of the project replays from the log before
        listening: the project's committed counter (on the primary, in the subscriber's
        transaction). In memory, an instance's relay publishes only what commits after it
        started, so a subscriber waits until it has."""
        if not self._shared:
            await self._started.wait()
        return await db_events.horizon(conn, project_id)

    async def lead(self) -> None:
        # a system connection: the relay reads every tenant's events
        async with contextlib.AsyncExitStack() as stack:
            conn = await stack.enter_async_context(
                await system_connection(self._url, autocommit=True)
            )
            # where the events' notifications fire: the group's worker on Citus
            listener = conn
            if self._group is not None:
                listener = await stack.enter_async_context(
                    await system_connection(self._group.url(self._url), autocommit=True)
                )
            group = None if self._group is None else self._group.id
            if self._shared:
                await take_lock(conn, db_events.relay_lock(group), self._poll)
                await db_events.listen(listener)
                positions = await db_events.relay_positions(conn)
            else:
                await db_events.listen(listener)
                if self._positions is None:
                    self._positions = await db_events.counters(conn)
                    self._started.set()
                # after a lost connection, resume where publishing stopped
                positions = self._positions
            self.role = "leader"
            log.info(
                "%s %s leads, %d projects' positions known", self.label, self.name, len(positions)
            )
            # None: read every project (the first read, and the periodic safety net)
            moved: set[uuid.UUID] | None = None
            swept = time.monotonic()
            ranges = None
            while True:
                if moved is None:
                    swept = time.monotonic()
                    if group is not None:
                        # the shards the group holds now (a rebalance moves them)
                        ranges = await db_cluster.group_ranges(conn, group)
                read = await db_events.read_committed(
                    conn, positions, self._batch, moved, None if moved else ranges
                )
                if read.events:
                    assert read.epoch is not None
                    await self._publish(read.events, read.epoch)
                if read.positions:
                    if self._shared:
                        await db_events.mark_published(conn, read.positions)
                    positions.update(read.positions)
                if read.full:
                    continue  # more may be waiting
                # Every commit after the read's snapshot notifies after it, naming its project;
                # a notification that came during the read waits in psycopg's backlog and wakes
                # this at once. So a read that was not full is not repeated before the next
                # notification, and that read covers the projects notified only: a save costs
                # one read of its own project. No notification within `poll`, or `poll`
                # seconds since the last read of every project: read them all again.
                moved = db_events.moved_projects(await db_events.notified(listener, self._poll))
                if not moved or time.monotonic() - swept >= self._poll:
                    moved = None

    async def _publish(self, events: Sequence[MemoryEvent], epoch: int) -> None:
        """Publish each event in order, with the credential epoch it was read at; while the
        broadcast is down, keep trying."""
        with spans.span("memql.relay.publish", {"memql.events": len(events)}):
            delay = 0.05
            for event in events:
                message = wire.encode(event, epoch)
                channel = wire.event_channel(event)
                while True:
                    try:
                        await self._bus.publish(channel, message)
                        metrics.EVENTS_PUBLISHED.inc()
                        break
                    except BusUnavailable as exc:
                        log.debug("relay waits for the broadcast: %s", exc)
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, 1.0)


class RelayFleet(Relay):
    """On Citus: a `Relay` per worker group, each leading (or standing by) on its own; a group
    added to the cluster gets one within `refresh` seconds. Leads while any of them does."""

    label = "relays"

    def __init__(
        self,
        database_url: str,
        bus: EventBus,
        *,
        shared: bool,
        batch: int = 500,
        poll: float = 0.5,
        refresh: float = 5.0,
    ) -> None:
        super().__init__(database_url, bus, shared=shared, batch=batch, poll=poll)
        self._batch_size = batch
        self._refresh = refresh
        self.relays: dict[int, Relay] = {}
        self._first = asyncio.Event()

    @property
    def role(self) -> str:
        relays = getattr(self, "relays", {})
        return "leader" if any(r.role == "leader" for r in relays.values()) else "standby"

    @role.setter
    def role(self, value: str) -> None:
        pass  # the fleet's role is its relays'

    async def horizon(self, conn: psycopg.AsyncConnection, project_id: uuid.UUID) -> int:
        if not self._shared:
            # in memory, each group's relay publishes what commits after it started
            await self._first.wait()
            for relay in list(self.relays.values()):
                await relay._started.wait()
        return await db_events.horizon(conn, project_id)

    async def lead(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            while True:
                async with await system_connection(self._url, autocommit=True) as conn:
                    groups = await db_cluster.worker_groups(conn)
                for group in groups:
                    if group.id not in self.relays:
                        relay = Relay(
                            self._url,
                            self._bus,
                            shared=self._shared,
                            batch=self._batch_size,
                            poll=self._poll,
                            group=group,
                        )
                        await stack.enter_async_context(running(relay))
                        self.relays[group.id] = relay
                self._first.set()
                await asyncio.sleep(self._refresh)
