"""One subscriber's stream: replay from the event log, then live, with no gap and no duplicate.

The order of steps is what makes the seam exact:

1. subscribe to the owners' channels (confirmed: every later broadcast reaches the inbox);
2. read the horizon H, the project's committed counter (cursors count per project): every
   event up to H has committed, and every one above H commits after this read, so the relay
   broadcasts it after the subscription and it arrives through the inbox;
3. replay the log from `since` up to H; then deliver the inbox in order, dropping cursors at or
   below the last one delivered.

When the bus reconnects (messages may have been lost), the inbox asks for a resync and steps 2
and 3 run again from the last cursor delivered. Credentials are checked again every
`recheck_interval` seconds; a revoked key or a withdrawn grant ends the stream with an error.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from memql import metrics
from memql.db import events as db_events
from memql.db.session import Sessions
from memql.errors import BadInput, MemqlError, SubscriberBehind
from memql.model import MemoryEvent, Principal, Scope
from memql.realtime import wire
from memql.realtime.bus import EventBus
from memql.realtime.recheck import Recheck, Rechecker
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
    sessions: Sessions,
    principal: Principal,
    scopes: Sequence[Scope],
    since: int | None,
    recheck: Recheck | None,
    rechecker: Rechecker,
    limits: StreamLimits,
) -> AsyncGenerator[MemoryEvent, None]:
    """The principal's events in `scopes`, in cursor order, each once."""
    channel = wire.channel(principal.project_id)
    routes = [(channel, wire.route(s, principal.owner_for(s))) for s in scopes]
    counted = False
    try:
        async with bus.inbox(routes, limits.queue) as inbox:
            with contextlib.ExitStack() as watching:
                watch = None
                if recheck is not None:
                    watch = watching.enter_context(rechecker.watch(recheck, scopes, inbox.wake))
                async with sessions.bound(principal) as conn:
                    horizon = await relay.horizon(conn, principal.project_id)
                if since is not None and since > horizon:
                    raise _beyond_the_log(since)
                # set up: every event above the horizon now reaches the inbox
                metrics.SUBSCRIPTIONS.inc()
                counted = True
                last = since if since is not None else horizon
                replay_to = horizon if since is not None else None
                while True:
                    if watch is not None and watch.failure is not None:
                        raise watch.failure
                    if inbox.resync:
                        inbox.resync = False
                        async with sessions.bound(principal) as conn:
                            replay_to = await relay.horizon(conn, principal.project_id)
                    while replay_to is not None and last < replay_to:
                        async with sessions.bound(principal) as conn:
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
                            "this subscriber fell too far behind the live stream; subscribe"
                            " again with `since` set to the last cursor it received",
                            since=str(last),
                        )
                    for live in inbox.take():
                        if live.cursor <= last:
                            continue
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


def _beyond_the_log(since: int) -> BadInput:
    """The refusal of a `since` above the project's committed counter: no event of the project
    has had it, and such a stream would wait, silent, for the log to reach it."""
    return BadInput(
        f"`since` {since} is beyond the end of the event log: pass the cursor of an event"
        " this API returned, or omit `since` to start with the next event",
        argument="since",
    )
