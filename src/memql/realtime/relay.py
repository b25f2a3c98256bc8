"""The relay: the event log, in cursor order, onto the broadcast.

Each write's transaction inserts its event row; a trigger sends `NOTIFY memql_events` with the
cursor. The relay wakes on a notification (or every `poll` seconds), reads the events that are
final (see `db.events.read_final`: a cursor is published only once no lower one can still
commit), and publishes each on its project's channel, in cursor order.

With Redis, one relay is active across all instances: the holder of a PostgreSQL advisory lock
on its own connection. When that connection ends (the process died) another instance takes the
lock within `poll` seconds and resumes from `published`, the last cursor known to have reached
the broadcast; subscribers drop the duplicates this may resend. Before publishing a batch the
leader raises `horizon` to its last cursor, so a subscriber that replays from the log up to
`horizon` and then listens cannot fall between the two.

In memory (no Redis) each instance relays for itself and keeps its position in memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import psycopg

from memql import metrics
from memql.db import events as db_events
from memql.db.pool import system_connection
from memql.leadership import Supervised, take_lock
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
    ) -> None:
        super().__init__()
        self._url = database_url
        self._bus = bus
        # shared: one leader across instances, position in the database
        self._shared = shared
        self._batch = batch
        self._poll = poll
        # local mode: every event up to here is final and none above it was published
        self._horizon: int | None = None
        self._horizon_ready = asyncio.Event()

    async def horizon(self, conn: psycopg.AsyncConnection) -> int:
        """The cursor up to which a subscriber replays from the log before listening."""
        if self._shared:
            return (await db_events.relay_position(conn)).horizon
        await self._horizon_ready.wait()
        assert self._horizon is not None
        return self._horizon

    async def lead(self) -> None:
        # a system connection: the relay reads every tenant's events
        async with await system_connection(self._url, autocommit=True) as conn:
            if self._shared:
                await take_lock(conn, db_events.RELAY_LOCK, self._poll)
                await db_events.listen(conn)
                position = (await db_events.relay_position(conn)).published
            else:
                await db_events.listen(conn)
                if self._horizon is None:
                    self._horizon = await db_events.final_position(conn)
                    self._horizon_ready.set()
                # after a lost connection, resume where publishing stopped
                position = self._horizon
            self.role = "leader"
            log.info("relay %s leads from cursor %s", self.name, position)
            gap: db_events.Gap | None = None
            while True:
                final = await db_events.read_final(conn, position, gap, self._batch)
                gap = final.waiting
                if final.events:
                    last = final.events[-1].cursor
                    if self._shared:
                        await db_events.advance_horizon(conn, last, self.name)
                    else:
                        self._horizon = last
                    await self._publish(final.events)
                    if self._shared:
                        await db_events.mark_published(conn, last)
                    position = last
                    if len(final.events) == self._batch:
                        continue  # a full read: more may be waiting
                if gap is not None and gap.decided:
                    continue
                # Every commit after the read's snapshot notifies after it; a notification that
                # came during the read waits in psycopg's backlog and wakes this at once. So a
                # read that was not full is not repeated before the next notification: a save
                # costs one read, not two (the second found nothing).
                async for _ in conn.notifies(timeout=self._poll, stop_after=1):
                    pass

    async def _publish(self, events: Sequence[MemoryEvent]) -> None:
        """Publish each event in order; while the broadcast is down, keep trying."""
        delay = 0.05
        for event in events:
            message = wire.encode(event)
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
