"""The broadcast between instances (`broadcaster` over Redis, or in memory), supervised.

broadcaster's Redis listener dies with its connection and never comes back, and its subscriber
queues are unbounded. So the bus:

- subscribes each channel once per instance and fans messages out to bounded `Inbox`es;
- proves a subscription is live before reporting it ready, by receiving its own sync message
  on it (a message published after that point cannot be missed);
- sends itself a numbered heartbeat; when one is late or missing it rebuilds the connection,
  resubscribes, and tells every inbox to resynchronise from the event log (`Inbox.resync`),
  because messages sent meanwhile are lost, and sends again what it published in the last few
  seconds (after a Sentinel failover, what went to the former master reached nobody);
- on Redis Cluster, when one channel's subscription lapses (its slot moved to another node),
  subscribes that channel again and, once that is confirmed, resynchronises its inboxes only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from broadcaster import Broadcast, BroadcastBackend

from memql.model import MemoryEvent
from memql.realtime import wire

log = logging.getLogger(__name__)

_SYNC = '{"sync":'


class BusUnavailable(Exception):
    """The broadcast is reconnecting; publish again later."""


class Inbox:
    """One subscriber's bounded mailbox of live events.

    When it would exceed `limit` events it drops them all and sets `overflowed`: a subscriber
    that far behind is closed, and resumes from the event log.
    """

    def __init__(self, limit: int) -> None:
        self._items: deque[MemoryEvent] = deque()
        self._limit = limit
        self._wake = asyncio.Event()
        self.overflowed = False
        # the highest credential epoch of the events in the inbox (wire.Relayed), None when
        # one came without
        self.epoch: int | None = 0
        # messages may have been lost (the bus reconnected): read the event log again
        self.resync = False

    def push(self, event: MemoryEvent, epoch: int | None) -> None:
        """`epoch`: the credential epoch `event` was read at (None: not known)."""
        if self.overflowed:
            return
        if epoch is None or self.epoch is None:
            self.epoch = None
        else:
            self.epoch = max(self.epoch, epoch)
        if len(self._items) >= self._limit:
            self.overflowed = True
            self._items.clear()
        else:
            self._items.append(event)
        self._wake.set()

    def mark_resync(self) -> None:
        self.resync = True
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    async def wait(self, seconds: float | None = None) -> None:
        """Until something arrives, the inbox is woken (`wake`; the bus wakes every inbox now
        and then, so an idle stream looks at its state even if nothing else does), or
        `seconds` pass when given."""
        # streams wait with no timer: with a thousand subscribers, arming and cancelling one
        # per wake-up cost as much as writing the event to the socket
        if seconds is None:
            await self._wake.wait()
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self._wake.wait()
        self._wake.clear()

    def take(self) -> list[MemoryEvent]:
        """Every event in the inbox, oldest first (read `epoch` before: it is theirs)."""
        items = list(self._items)
        self._items.clear()
        self.epoch = 0
        return items

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class _Channel:
    # by route (an owner's key within the channel, see `wire.route`)
    inboxes: dict[str, set[Inbox]] = field(default_factory=dict)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    # the highest cursor seen on the channel, kept across reconnects
    last: int | None = None


# at most this many messages kept for `EventBus._republish`
REPUBLISH_MOST = 10_000


class EventBus:
    """Publish to and subscribe from channels of every instance (Redis) or of this one (memory)."""

    def __init__(
        self,
        redis_url: str | None,
        *,
        heartbeat_interval: float = 0.5,
        heartbeat_timeout: float = 2.0,
        subscribe_timeout: float = 5.0,
        idle_wake: float = 30.0,
        republish_window: float = 5.0,
    ) -> None:
        self._url = redis_url or "memory://"
        self.backend = "redis" if redis_url else "memory"
        self._heartbeat_interval = heartbeat_interval
        self._heartbeat_timeout = heartbeat_timeout
        self._subscribe_timeout = subscribe_timeout
        self._idle_wake = idle_wake
        self._instance = uuid.uuid4().hex
        self._heartbeat_channel = f"memql:bus:{self._instance}"
        self._broadcast: Broadcast | None = None
        self._channels: dict[str, _Channel] = {}
        self._up = asyncio.Event()
        self._trouble = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._beat_task: asyncio.Task[None] | None = None
        self._beat_sent = 0
        self._beat_seen = 0
        self._beat_at = time.monotonic()
        self._resubscribing: dict[str, asyncio.Task[None]] = {}
        self.reconnects = 0
        # what this instance published in the last `republish_window` seconds, sent again
        # once the connection is rebuilt (see `_republish`)
        self._republish_window = republish_window
        self._recent: deque[tuple[float, str, str]] = deque()
        # channels subscribed again after their subscription lapsed alone (Redis Cluster)
        self.resubscribes = 0

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._wake_idle(), name="memql-bus-idle-wake"))
        if self.backend == "memory":
            await self._connect()
            return
        # Redis may be down at start: the instance serves anyway and the bus catches up
        self._tasks.append(asyncio.create_task(self._supervise(), name="memql-bus-supervisor"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks.clear()
        await self._disconnect()

    async def _wake_idle(self) -> None:
        """Every `idle_wake` seconds, wake every inbox: one timer for all of them."""
        while True:
            await asyncio.sleep(self._idle_wake)
            for channel in list(self._channels.values()):
                for boxes in list(channel.inboxes.values()):
                    for box in list(boxes):
                        box.wake()

    @property
    def state(self) -> str:
        """`up` or `reconnecting`."""
        return "up" if self._up.is_set() else "reconnecting"

    # --- publishing and subscribing -------------------------------------------------------

    async def publish(self, channel: str, message: str) -> None:
        broadcast = self._broadcast
        if broadcast is None or not self._up.is_set():
            raise BusUnavailable("the broadcast is reconnecting")
        try:
            await broadcast.publish(channel, message)
        except Exception as exc:
            self._trouble.set()
            raise BusUnavailable(f"publishing failed: {exc}") from exc
        if self.backend == "redis":
            now = time.monotonic()
            self._recent.append((now, channel, message))
            while self._recent and (
                self._recent[0][0] < now - self._republish_window
                or len(self._recent) > REPUBLISH_MOST
            ):
                self._recent.popleft()

    async def _republish(self) -> None:
        """After the connection was rebuilt: send again what this instance published in the
        last `republish_window` seconds. Behind Sentinel the former master answers as a master
        for a while after a failover, and until this instance sees the move
        (`redis_client.watch_master`, every 0.5 s) what it publishes there reaches no instance
        already on the promoted one; nothing later may come to show those instances the gap.
        A subscriber takes each cursor once, so a message it already had changes nothing."""
        broadcast = self._broadcast
        since = time.monotonic() - self._republish_window
        recent = [(c, m) for at, c, m in self._recent if at >= since]
        for channel, message in recent:
            if broadcast is None:
                return
            try:
                await broadcast.publish(channel, message)
            except Exception as exc:
                log.warning("republishing after the reconnect failed: %s", exc)
                self._trouble.set()
                return
        if recent:
            log.info("republished %d messages after the reconnect", len(recent))

    @asynccontextmanager
    async def inbox(self, routes: Iterable[tuple[str, str]], limit: int) -> AsyncIterator[Inbox]:
        """A mailbox receiving the events of `routes`, pairs of (channel, route within it).
        When it is yielded, every message published from then on reaches it, unless the bus is
        reconnecting (it then gets `resync` later). Messages of one channel arrive in the order
        they were published."""
        box = Inbox(limit)
        wanted = list(dict.fromkeys(routes))
        for name, route in wanted:
            channel = self._channels.get(name)
            if channel is None:
                channel = self._channels[name] = _Channel()
                self._start_pump(name, channel)
            channel.inboxes.setdefault(route, set()).add(box)
        names = list(dict.fromkeys(name for name, _ in wanted))
        try:
            await self._until_ready(names)
            yield box
        finally:
            for name, route in wanted:
                channel = self._channels.get(name)
                if channel is None:
                    continue
                boxes = channel.inboxes.get(route)
                if boxes is not None:
                    boxes.discard(box)
                    if not boxes:
                        del channel.inboxes[route]
                if not channel.inboxes:
                    del self._channels[name]
                    if channel.task is not None:
                        channel.task.cancel()

    async def _until_ready(self, names: list[str]) -> None:
        if not self._up.is_set():
            return
        events = [self._channels[n].ready for n in names if n in self._channels]
        if not await _all_set(events, self._subscribe_timeout):
            log.warning("a subscription was not confirmed in time; reconnecting the broadcast")
            self._trouble.set()

    def _start_pump(self, name: str, channel: _Channel) -> None:
        broadcast = self._broadcast
        if broadcast is None or not self._up.is_set():
            return  # started by the reconnect
        if channel.task is not None and not channel.task.done():
            return
        channel.ready.clear()
        channel.task = asyncio.create_task(self._pump(broadcast, name, channel))

    async def _pump(self, broadcast: Broadcast, name: str, channel: _Channel) -> None:
        token = uuid.uuid4().hex
        confirming: asyncio.Task[None] | None = None
        try:
            async with broadcast.subscribe(name) as subscriber:
                confirming = asyncio.create_task(self._confirm(broadcast, name, token, channel))
                while True:
                    event = await subscriber.get()
                    text = event.message
                    if text.startswith(_SYNC):
                        if token in text:
                            channel.ready.set()
                        continue
                    # decoded once for every subscriber of this instance
                    try:
                        decoded = wire.decode(text)
                    except (ValueError, KeyError, TypeError):
                        log.warning("ignoring a malformed message on %s", name)
                        continue
                    self._check_sequence(channel, decoded.event.cursor)
                    route = wire.event_route(decoded.event)
                    for box in list(channel.inboxes.get(route, ())):
                        box.push(decoded.event, decoded.epoch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("broadcast subscription %s failed: %s", name, exc)
            self._trouble.set()
        finally:
            if confirming is not None:
                confirming.cancel()

    async def _confirm(
        self, broadcast: Broadcast, name: str, token: str, channel: _Channel
    ) -> None:
        """Publish the sync message until it comes back. A subscribe is sent on the
        subscriber's connection and the message on another: the server may take the message
        first, and a subscription is then confirmed by the next one."""
        while not channel.ready.is_set():
            try:
                await broadcast.publish(name, json.dumps({"sync": token}))
            except Exception as exc:
                log.warning("broadcast subscription %s not confirmed: %s", name, exc)
                self._trouble.set()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(channel.ready.wait(), self._heartbeat_interval)

    @staticmethod
    def _check_sequence(channel: _Channel, cursor: int) -> None:
        """A project's channel carries every event of the project in cursor order, and its
        cursors count without gaps: a jump means messages were lost (published where this
        instance was not listening, as around a Redis failover, when the relay's connection
        moves after the bus's) or events were erased before the relay read them. Either way
        the log has the truth: every inbox of the channel reads it again."""
        if channel.last is not None and cursor > channel.last + 1:
            for boxes in channel.inboxes.values():
                for box in boxes:
                    box.mark_resync()
        channel.last = cursor if channel.last is None else max(channel.last, cursor)

    # --- supervision ----------------------------------------------------------------------

    def _lost(self, name: str) -> None:
        """One channel's subscription lapsed (Redis Cluster: its slot moved): subscribe it
        again; anything else lapsing (the heartbeat) puts the whole connection in doubt."""
        if name not in self._channels:
            self._trouble.set()
            return
        running = self._resubscribing.get(name)
        if running is None or running.done():
            self._resubscribing[name] = asyncio.create_task(
                self._resubscribe(name), name="memql-bus-resubscribe"
            )

    async def _resubscribe(self, name: str) -> None:
        """Subscribe `name` again and, once a message of ours comes back on it, send its
        inboxes to the event log: messages published while it lapsed are lost, and any
        published from then on arrive (the order `stream.py` needs)."""
        channel = self._channels.get(name)
        if channel is None or not self._up.is_set():
            return  # gone, or the reconnect resubscribes and resynchronises everything
        if channel.task is not None:
            channel.task.cancel()
            with contextlib.suppress(BaseException):
                await channel.task
            channel.task = None
        if self._channels.get(name) is not channel:
            return  # its last inbox left meanwhile
        self._start_pump(name, channel)
        if not await _all_set([channel.ready], self._subscribe_timeout):
            log.warning("channel %s was not subscribed again in time; reconnecting", name)
            self._trouble.set()
            return
        self.resubscribes += 1
        for boxes in channel.inboxes.values():
            for box in boxes:
                box.mark_resync()

    async def _connect(self) -> None:
        if self.backend == "redis":
            from memql.redis_client import is_cluster

            backend: BroadcastBackend
            if is_cluster(self._url):
                from memql.realtime.redis_cluster_backend import ShardedPubSubBackend

                backend = ShardedPubSubBackend(
                    self._url, on_failure=lambda _: self._trouble.set(), on_lost=self._lost
                )
            else:
                from memql.realtime.redis_backend import RedisPubSubBackend

                backend = RedisPubSubBackend(self._url, on_failure=lambda _: self._trouble.set())
            broadcast = Broadcast(backend=backend)
        else:
            broadcast = Broadcast(self._url)
        try:
            await broadcast.connect()
        except BaseException:
            with contextlib.suppress(Exception):
                await broadcast.disconnect()
            raise
        self._broadcast = broadcast
        self._up.set()
        self._beat_at = time.monotonic()
        self._beat_seen = self._beat_sent
        if self.backend == "redis":
            self._beat_task = asyncio.create_task(self._pump_heartbeat(broadcast))
        channels = list(self._channels.values())
        for name, channel in self._channels.items():
            self._start_pump(name, channel)
        if not await _all_set([c.ready for c in channels], self._subscribe_timeout):
            raise BusUnavailable("subscriptions were not confirmed in time")

    async def _disconnect(self) -> None:
        self._up.clear()
        resubscribing = list(self._resubscribing.values())
        self._resubscribing.clear()
        for task in resubscribing:
            task.cancel()
        for task in resubscribing:
            with contextlib.suppress(BaseException):
                await task
        if self._beat_task is not None:
            self._beat_task.cancel()
            with contextlib.suppress(BaseException):
                await self._beat_task
            self._beat_task = None
        for channel in self._channels.values():
            if channel.task is not None:
                channel.task.cancel()
                with contextlib.suppress(BaseException):
                    await channel.task
                channel.task = None
        broadcast, self._broadcast = self._broadcast, None
        if broadcast is not None:
            with contextlib.suppress(Exception):
                await broadcast.disconnect()

    async def _pump_heartbeat(self, broadcast: Broadcast) -> None:
        try:
            async with broadcast.subscribe(self._heartbeat_channel) as subscriber:
                while True:
                    event = await subscriber.get()
                    seq = int(event.message)
                    if seq != self._beat_seen + 1 and self._beat_seen:
                        # a beat went missing, so may have events: read the log again
                        log.warning("broadcast heartbeat skipped (%s -> %s)", self._beat_seen, seq)
                        self._trouble.set()
                    self._beat_seen = seq
                    self._beat_at = time.monotonic()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("broadcast heartbeat listener failed: %s", exc)
            self._trouble.set()

    async def _supervise(self) -> None:
        delay = 0.2
        while True:
            try:
                await self._connect()
                delay = 0.2
            except Exception as exc:
                log.warning("broadcast unavailable (%s); retrying in %.1fs", exc, delay)
                await self._disconnect()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if self.reconnects:
                log.warning("broadcast reconnected; subscribers resynchronise from the event log")
                await self._republish()
            for channel in self._channels.values():
                for boxes in channel.inboxes.values():
                    for box in boxes:
                        box.mark_resync()
            await self._watch()
            self.reconnects += 1
            await self._disconnect()

    async def _watch(self) -> None:
        """Return when the connection is in doubt."""
        self._trouble.clear()
        broadcast = self._broadcast
        assert broadcast is not None
        while not self._trouble.is_set():
            self._beat_sent += 1
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    broadcast.publish(self._heartbeat_channel, str(self._beat_sent)),
                    self._heartbeat_timeout,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._trouble.wait(), self._heartbeat_interval)
            if time.monotonic() - self._beat_at > self._heartbeat_timeout:
                log.warning("broadcast heartbeat lost; reconnecting")
                return


async def _all_set(events: list[asyncio.Event], seconds: float) -> bool:
    """Whether every event is set within `seconds`."""
    if all(e.is_set() for e in events):
        return True
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        _, pending = await asyncio.wait(waiters, timeout=seconds)
    finally:
        for waiter in waiters:
            waiter.cancel()
    return not pending
