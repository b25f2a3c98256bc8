"""One subscriber's stream: replay from the event log, then live, with no gap and no duplicate.

The order of steps is what makes the seam exact:

1. subscribe to the owners' channels (confirmed: every later broadcast reaches the inbox);
2. read the horizon H, the project's committed counter (cursors count per project): every
   event up to H has committed, and every one above H commits after this read, so the relay
   broadcasts it after the subscription and it arrives through the inbox;
3. replay the log from `since` up to H; then deliver the inbox in order, dropping cursors at or
   below the last one delivered.

When the bus reconnects (messages may have been lost), the inbox asks for a resync and steps 2
and 3 run again from the last cursor delivered.

Nothing is delivered on credentials that may no longer hold: every event comes with the
credential epoch of the snapshot it was read in (a replayed page's statement, the relay's read),
and the stream yields it only once its credentials are confirmed at that epoch or later
(`recheck.py`); while nothing changes that costs no read. A key revoked, a project disabled or a
grant narrowed by a database change before an event committed ends the stream with that error
instead of delivering the event; an API key that expires ends it at its expiry, and no event is
delivered after it (`Watch.refuse_if_expired`, before each delivery). Credentials are also
checked again every `recheck_interval` seconds, and at once when the database announces a
change.

The stream's reads of the log (its horizon, replayed pages) queue for a few slots per project
(`LogReads`): a thousand streams subscribing at once wait their turn instead of taking their
project's share of the pool from its requests, or failing when the pool's wait runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from memql import metrics
from memql.db import events as db_events
from memql.db.pool import Conn
from memql.db.session import Sessions
from memql.errors import (
    BadInput,
    CredentialsUnavailable,
    MemqlError,
    ServiceUnavailable,
    SubscriberBehind,
)
from memql.model import MemoryEvent, Principal, Scope
from memql.realtime import wire
from memql.realtime.bus import EventBus
from memql.realtime.recheck import Recheck, Rechecker, Watch
from memql.realtime.relay import Relay

log = logging.getLogger(__name__)

REPLAY_PAGE = 500
# seconds a stream waits, delivering nothing, for the database to confirm its credentials
UNAVAILABLE_GRACE = 30.0
# seconds a stream's read of the log, its turn come (`LogReads`), waits for its project's share
# of the pool and a connection: it queues behind requests instead of failing at their wait
LOG_READ_WAIT = 30.0


class LogReads:
    """At most `slots` of a project's streams read the log at once (per instance); the others
    wait, with no time limit, in order. A stream's read is not a request with a deadline: it
    may wait, but it must not fail because a thousand others started with it."""

    def __init__(self, slots: int = 2) -> None:
        self.slots = slots
        self._queues: dict[uuid.UUID, asyncio.Semaphore] = {}
        self._users: dict[uuid.UUID, int] = {}

    @asynccontextmanager
    async def turn(self, project_id: uuid.UUID) -> AsyncIterator[None]:
        queue = self._queues.get(project_id)
        if queue is None:
            queue = self._queues[project_id] = asyncio.Semaphore(self.slots)
        self._users[project_id] = self._users.get(project_id, 0) + 1
        try:
            async with queue:
                yield
        finally:
            left = self._users[project_id] - 1
            if left:
                self._users[project_id] = left
            else:
                del self._users[project_id], self._queues[project_id]


@dataclass(frozen=True)
class StreamLimits:
    # messages an inbox holds before its subscriber is closed as too slow
    queue: int = 1000
    # seconds between credential checks
    recheck_interval: float = 3.0


async def stream_events(
    *,
    bus: EventBus,
    relay: Relay,
    sessions: Sessions,
    principal: Principal,
    scopes: Sequence[Scope],
    since: int | None,
    recheck: Recheck | None,
    rechecker: Rechecker,
    limits: StreamLimits,
    reads: LogReads,
) -> AsyncGenerator[MemoryEvent, None]:
    """The principal's events in `scopes`, in cursor order, each once."""
    project_id = principal.project_id

    def read() -> contextlib.AbstractAsyncContextManager[Conn]:
        return sessions.read(principal, wait=LOG_READ_WAIT)

    async def horizon() -> int:
        async with reads.turn(project_id), read() as conn:
            return await relay.horizon(conn, project_id)

    channel = wire.channel(principal.project_id)
    routes = [(channel, wire.route(s, principal.owner_for(s))) for s in scopes]
    counted = False
    try:
        async with bus.inbox(routes, limits.queue) as inbox:
            with contextlib.ExitStack() as watching:
                watch = None
                if recheck is not None:
                    watch = watching.enter_context(
                        rechecker.watch(recheck, scopes, inbox.wake, principal.key_expires_at)
                    )
                first = await horizon()
                if since is not None and since > first:
                    raise _beyond_the_log(since)
                # set up: every event above the horizon now reaches the inbox
                metrics.SUBSCRIPTIONS.inc()
                counted = True
                last = since if since is not None else first
                replay_to = first if since is not None else None
                while True:
                    if watch is not None and watch.failure is not None:
                        raise watch.failure
                    if inbox.resync:
                        inbox.resync = False
                        replay_to = await horizon()
                    while replay_to is not None and last < replay_to:
                        async with reads.turn(project_id), read() as conn:
                            page = await db_events.replay(
                                conn, principal, scopes, last, replay_to, REPLAY_PAGE
                            )
                        epoch = page.epoch
                        if watch is not None and epoch is not None and watch.confirmed < epoch:
                            await _cleared(rechecker, watch, epoch)
                        for event in page.events:
                            if watch is not None and watch.expires is not None:
                                watch.refuse_if_expired()
                            yield event
                            last = event.cursor
                        if len(page.events) < REPLAY_PAGE:
                            last = replay_to
                    replay_to = None
                    if inbox.overflowed:
                        raise SubscriberBehind(
                            "this subscriber fell too far behind the live stream; subscribe"
                            " again with `since` set to the last cursor it received",
                            since=str(last),
                        )
                    epoch = inbox.epoch
                    taken = [e for e in inbox.take() if e.cursor > last]
                    if taken and watch is not None and (epoch is None or watch.confirmed < epoch):
                        await _cleared(rechecker, watch, epoch)
                    for live in taken:
                        if live.cursor <= last:
                            continue
                        if watch is not None and watch.expires is not None:
                            watch.refuse_if_expired()
                        yield live
                        last = live.cursor
                    idle = not (inbox.resync or inbox.overflowed or len(inbox))
                    if idle and (watch is None or watch.failure is None):
                        await inbox.wait()
    except MemqlError as exc:
        metrics.STREAMS_CLOSED.labels(exc.code).inc()
        raise
    finally:
        if counted:
            metrics.SUBSCRIPTIONS.dec()


async def _cleared(rechecker: Rechecker, watch: Watch, epoch: int | None) -> None:
    """Return once the stream may deliver events read at credential epoch `epoch`: its
    credentials confirmed at that epoch or later. Raises the credentials' failure. `epoch`
    None (a message from a sender that did not say): the epoch is read now, after the events
    arrived, which counts every change that committed before them.

    While the database cannot answer, nothing is delivered and the check is tried again; the
    stream ends (SERVICE_UNAVAILABLE) only after `UNAVAILABLE_GRACE` seconds of that."""
    delay, give_up = 0.1, time.monotonic() + UNAVAILABLE_GRACE
    while True:
        try:
            if epoch is None:
                epoch = await watch.recheck.epoch()
            await rechecker.confirm(watch, epoch)
            break
        except ServiceUnavailable:
            if time.monotonic() + delay > give_up:
                raise
        except MemqlError:
            raise
        except Exception as exc:
            log.warning("the credentials of a stream cannot be confirmed: %s", exc)
            raise CredentialsUnavailable("credentials cannot be checked right now") from None
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
    if watch.failure is not None:
        raise watch.failure


def _beyond_the_log(since: int) -> BadInput:
    """The refusal of a `since` above the project's committed counter: no event of the project
    has had it, and such a stream would wait, silent, for the log to reach it."""
    return BadInput(
        f"`since` {since} is beyond the end of the event log: pass the cursor of an event"
        " this API returned, or omit `since` to start with the next event",
        argument="since",
    )
