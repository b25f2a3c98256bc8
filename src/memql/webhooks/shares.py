"""The deliverer's connections, shared between projects so that none can take them all.

At most `total` attempts are in flight at once and at most `per_project` of one project (an
endpoint has one at a time: its worker sends in order). A freed slot goes to the waiting
project that holds the fewest, and among equals to the one served least recently (round robin;
never served comes first): a project that holds none is served next, however many slots the
others hold or how long their attempts have queued. With every attempt
bounded by a deadline, a slot frees within that deadline, so a newcomer waits at most one
deadline even while every other slot belongs to a hostile project's slow receivers.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Shares:
    def __init__(self, total: int, per_project: int) -> None:
        if total < 1 or per_project < 1:
            raise ValueError("shares need at least one connection")
        self.total = total
        self.per_project = min(per_project, total)
        self._held: dict[uuid.UUID, int] = {}
        self._in_use = 0
        # per project, its waiters in arrival order, each with its arrival number
        self._waiting: dict[uuid.UUID, deque[tuple[int, asyncio.Future[None]]]] = {}
        self._arrivals = itertools.count()
        # per project, the number of its last grant (one entry per project that ever delivered)
        self._last_grant: dict[uuid.UUID, int] = {}
        self._grants = itertools.count()

    @property
    def in_use(self) -> int:
        return self._in_use

    def held(self, project_id: uuid.UUID) -> int:
        return self._held.get(project_id, 0)

    @asynccontextmanager
    async def hold(self, project_id: uuid.UUID) -> AsyncIterator[None]:
        """One slot of `project_id`'s share for the duration of the block."""
        await self._acquire(project_id)
        try:
            yield
        finally:
            self._release(project_id)

    async def _acquire(self, project_id: uuid.UUID) -> None:
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._waiting.setdefault(project_id, deque())
        entry = (next(self._arrivals), granted)
        queue.append(entry)
        self._dispatch()
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                # granted in the same moment: give the slot on
                self._release(project_id)
            elif entry in queue:  # `_dispatch` drops an entry it finds cancelled
                queue.remove(entry)
                if not queue and self._waiting.get(project_id) is queue:
                    del self._waiting[project_id]
            raise

    def _release(self, project_id: uuid.UUID) -> None:
        self._in_use -= 1
        left = self._held[project_id] - 1
        if left:
            self._held[project_id] = left
        else:
            del self._held[project_id]
        self._dispatch()

    def _dispatch(self) -> None:
        """Give free slots to waiters: fewest held first, then the least recently served."""
        while self._in_use < self.total:
            eligible = [
                (self.held(p), self._last_grant.get(p, -1), queue[0][0], p)
                for p, queue in self._waiting.items()
                if queue and self.held(p) < self.per_project
            ]
            if not eligible:
                return
            *_, project_id = min(eligible)
            queue = self._waiting[project_id]
            _, granted = queue.popleft()
            if not queue:
                del self._waiting[project_id]
            if granted.done():  # cancelled while waiting
                continue
            self._in_use += 1
            self._held[project_id] = self.held(project_id) + 1
            self._last_grant[project_id] = next(self._grants)
            granted.set_result(None)
