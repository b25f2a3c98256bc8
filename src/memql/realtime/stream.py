"""One subscriber's stream: replay from the event log, then live, with no gap and no duplicate.

The order of steps is what makes the seam exact:

1. subscribe to the owners' channels (confirmed: every later broadcast reaches the inbox);
2. read the relay's horizon H: every event up to H is final, and none above H has been
   broadcast yet, so each event above H arrives through the inbox;
3. replay the log from `since` up to H; then deliver the inbox in order, dropping cursors at or
   below the last one delivered.

When the bus reconnects (messages may have been lost), the inbox asks for a resync and steps 2
and 3 run again from the last cursor delivered. Credentials are checked again every
`recheck_interval` seconds; a revoked key or a withdrawn grant ends the stream with an error.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from memql import metrics
from memql.db import events as db_events
from memql.db.repository import Conn
from memql.errors import BadInput, Forbidden, MemqlError, SubscriberBehind
from memql.model import MemoryEvent, Principal, Scope
from memql.realtime import wire
from memql.realtime.bus import EventBus
from memql.realtime.relay import Relay

log = logging.getLogger(__name__)

REPLAY_PAGE = 500


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
    session: Callable[[], AbstractAsyncContextManager[Conn]],
    principal: Principal,
    scopes: Sequence[Scope],
    since: int | None,
    recheck: Callable[[], Awaitable[Principal]] | None,
    limits: StreamLimits,
) -> AsyncIterator[MemoryEvent]:
    """The principal's events in `scopes`, in cursor order, each once."""
    channels = [wire.channel(principal.project_id, s, principal.owner_for(s)) for s in scopes]
    metrics.SUBSCRIPTIONS.inc()
    try:
        async with bus.inbox(channels, limits.queue) as inbox:
            async with session() as conn:
                horizon = await relay.horizon(conn)
                if since is not None and since > horizon:
                    await _check_issued(conn, since)
            last = since if since is not None else horizon
            replay_to = horizon if since is not None else None
            # spread the checks of subscribers that connected together over one interval
            next_check = time.monotonic() + limits.recheck_interval * random.uniform(0.5, 1.0)
            while True:
                if inbox.resync:
                    inbox.resync = False
                    async with session() as conn:
                        replay_to = await relay.horizon(conn)
                while replay_to is not None and last < replay_to:
                    async with session() as conn:
                        page = await db_events.replay(
                            conn, principal, scopes, last, replay_to, REPLAY_PAGE
                        )
                    for event in page:
                        yield event
                        last = event.cursor
                    if len(page) < REPLAY_PAGE:
                        last = replay_to
                replay_to = None
                if inbox.overflowed:
                    raise SubscriberBehind(
                        "this subscriber fell too far behind the live stream; subscribe again with"
                        " `since` set to the last cursor it received",
                        since=str(last),
                    )
                for live in inbox.take():
                    if live.cursor <= last:
                        continue
                    yield live
                    last = live.cursor
                if recheck is not None and time.monotonic() >= next_check:
                    await _recheck(recheck, scopes)
                    next_check = time.monotonic() + limits.recheck_interval
                if not inbox.resync and not inbox.overflowed and not len(inbox):
                    await inbox.wait(max(0.0, next_check - time.monotonic()))
    except MemqlError as exc:
        metrics.STREAMS_CLOSED.labels(exc.code).inc()
        raise
    finally:
        metrics.SUBSCRIPTIONS.dec()


async def _check_issued(conn: Conn, since: int) -> None:
    """Refuse a `since` no event has ever had: such a stream would wait, silent, for the log to
    reach it. (Above the horizon but issued is fine: the event is on its way.)"""
    if since > await db_events.last_issued(conn):
        raise BadInput(
            f"`since` {since} is beyond the end of the event log: pass the cursor of an event"
            " this API returned, or omit `since` to start with the next event",
            argument="since",
        )


async def _recheck(recheck: Callable[[], Awaitable[Principal]], scopes: Sequence[Scope]) -> None:
    """Raise when the subscriber's credentials no longer allow reading `scopes`."""
    principal = await recheck()
    lost = [s.value for s in scopes if not principal.grant.for_scope(s).can_read]
    if lost:
        raise Forbidden(
            f"the grant no longer allows reading {', '.join(lost)}-scope memories; the stream"
            " is closed",
            reason="grant-withdrawn",
        )
