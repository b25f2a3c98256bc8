"""Realtime: memory events from the log to subscribers of every instance.

`open_realtime` is entered once in the app's lifespan; it starts the broadcast (Redis with
`REDIS_URL`, in memory without) and the relay, and hands the service what its streams need.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from memql.db.pool import owner_connection
from memql.db.session import Sessions, is_distributed
from memql.leadership import running
from memql.model import MemoryEvent, Principal, Scope
from memql.realtime.bus import EventBus
from memql.realtime.recheck import Recheck, Rechecker
from memql.realtime.relay import Relay, RelayFleet
from memql.realtime.stream import LogReads, StreamLimits, stream_events
from memql.settings import Settings


class Realtime:
    """The running broadcast and relay of one instance."""

    def __init__(
        self, bus: EventBus, relay: Relay, limits: StreamLimits, rechecker: Rechecker
    ) -> None:
        self.bus = bus
        self.relay = relay
        self.limits = limits
        self.rechecker = rechecker
        self.reads = LogReads()

    def state(self) -> dict[str, Any]:
        """For /readyz: the broadcast backend and whether it is connected; the relay's role
        (on Citus "leader" while it leads for any worker group, and each group's role)."""
        state: dict[str, Any] = {
            "broadcast": {
                "backend": self.bus.backend,
                "state": self.bus.state,
                "reconnects": self.bus.reconnects,
            },
            "relay": self.relay.role,
        }
        if isinstance(self.relay, RelayFleet):
            state["relay_groups"] = {str(g): r.role for g, r in sorted(self.relay.relays.items())}
        return state

    async def position(self, sessions: Sessions, principal: Principal) -> int:
        """A cursor a stream may start from to receive every event committed after this call:
        the project's horizon (every event of the project up to it has committed; any later
        one is still to come). Cursors count per project."""
        async with sessions.bound(principal) as conn:
            return await self.relay.horizon(conn, principal.project_id)

    def events(
        self,
        sessions: Sessions,
        principal: Principal,
        scopes: Sequence[Scope],
        since: int | None,
        recheck: Recheck | None,
    ) -> AsyncGenerator[MemoryEvent, None]:
        return stream_events(
            bus=self.bus,
            relay=self.relay,
            sessions=sessions,
            principal=principal,
            scopes=scopes,
            since=since,
            recheck=recheck,
            rechecker=self.rechecker,
            limits=self.limits,
            reads=self.reads,
        )


async def relay_for(database_url: str, bus: EventBus, *, shared: bool) -> Relay:
    """The relay of the database: one, or on a Citus coordinator one per worker group."""
    async with await owner_connection(database_url, autocommit=True) as conn:
        distributed = await is_distributed(conn)
    if distributed:
        return RelayFleet(database_url, bus, shared=shared)
    return Relay(database_url, bus, shared=shared)


@asynccontextmanager
async def open_realtime(settings: Settings, database_url: str) -> AsyncIterator[Realtime]:
    bus = EventBus(settings.redis_url)
    await bus.start()
    try:
        relay = await relay_for(database_url, bus, shared=settings.redis_url is not None)
        rechecker = Rechecker(settings.auth_recheck_seconds)
        checking = asyncio.create_task(rechecker.run(), name="memql-stream-recheck")
        try:
            async with running(relay):
                yield Realtime(
                    bus,
                    relay,
                    StreamLimits(
                        queue=settings.subscriber_queue,
                        recheck_interval=settings.auth_recheck_seconds,
                    ),
                    rechecker,
                )
        finally:
            checking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await checking
    finally:
        await bus.stop()
