"""Resolved credentials kept in memory, forgotten on every instance as soon as one changes.

A request's credential (an API key's hash, or a browser token's issuer) resolves to its project
and, for a key, its consumer. Resolving costs a lookup and a `last_used_at` write; the answer
only changes when a key or a project changes, which is rare. So answers are kept here, and
triggers on `api_keys` and `projects` send `NOTIFY memql_credentials`
(`007_credential_notify.sql`): every instance listens and forgets everything it kept.

A notification reaches the other instances a moment after the change commits, and a request may
arrive in that moment. So a kept answer is served only after `holds` confirms it in one
single-statement probe (the key still live, the project still entitled): a revocation takes
effect on the very next request of every instance. The probe is one round trip where resolving
is several.

Fail-safe: the cache serves only while its listener is connected. When the listener's
connection is lost (or stops answering its health check) everything is forgotten and nothing is
kept until it is back, so a notification missed meanwhile cannot leave a revoked key usable.
An answer resolved while a notification arrived is not kept, and a kept answer whose probe
overlapped one is resolved again (generation checks). Entries also
expire after `ttl` seconds, which bounds how stale `last_used_at` gets.

Whoever else must act on a change at once (open streams re-check their credentials before
their next delivery, realtime/recheck.py) registers with `on_change`: it is called for every
notification, and when the listener (re)connects, since anything may have changed meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

import psycopg

from memql.db.pool import owner_connection

log = logging.getLogger("memql.access")

CHANNEL = "memql_credentials"
T = TypeVar("T")


class CredentialCache(Generic[T]):
    def __init__(self, *, ttl: float = 60.0, max_entries: int = 10_000) -> None:
        self._ttl = ttl
        self._max = max_entries
        self._entries: OrderedDict[object, tuple[float, T]] = OrderedDict()
        self._generation = 0
        self.listening = False
        self._on_change: list[Callable[[], None]] = []

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever credentials may have changed (see the module's docstring)."""
        if callback not in self._on_change:
            self._on_change.append(callback)

    def _changed(self) -> None:
        self.forget()
        for callback in list(self._on_change):
            try:
                callback()
            except Exception:
                log.exception("a credential change callback failed")

    def forget(self) -> None:
        self._entries.clear()
        self._generation += 1

    def __len__(self) -> int:
        return len(self._entries)

    async def get(
        self,
        key: object,
        resolve: Callable[[], Awaitable[T | None]],
        holds: Callable[[T], Awaitable[bool]],
    ) -> T | None:
        """The kept answer for `key` if `holds(answer)` confirms it, else `resolve()`'s (kept
        when not None and no change was announced meanwhile)."""
        if self.listening:
            found = self._entries.get(key)
            if found is not None:
                generation = self._generation
                if found[0] > time.monotonic() and await holds(found[1]):
                    # while the probe ran, a change may have been announced (everything was
                    # forgotten: the probe may predate the change, so resolve afresh) or another
                    # request may have dropped this entry
                    if generation == self._generation:
                        if self._entries.get(key) is found:
                            self._entries.move_to_end(key)
                        return found[1]
                elif self._entries.get(key) is found:
                    del self._entries[key]
        generation = self._generation
        value = await resolve()
        if value is not None and self.listening and generation == self._generation:
            self._entries[key] = (time.monotonic() + self._ttl, value)
            if len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return value

    def _lost(self) -> None:
        self.listening = False
        self.forget()

    async def listen(self, url: str, *, health_every: float = 5.0, retry: float = 1.0) -> None:
        """Keep the cache in step with the database until cancelled."""
        while True:
            try:
                async with await owner_connection(url, autocommit=True, connect_timeout=5) as conn:
                    await conn.execute(f"listen {CHANNEL}")
                    # anything may have changed while no one listened
                    self.listening = True
                    self._changed()
                    while True:
                        async for _ in conn.notifies(timeout=health_every):
                            self._changed()
                        # a quiet channel: make sure the connection still answers
                        await asyncio.wait_for(conn.execute("select 1"), health_every)
            except asyncio.CancelledError:
                self._lost()
                raise
            except (psycopg.Error, OSError, TimeoutError) as exc:
                if self.listening:
                    log.warning("credential cache off (its listener was lost): %s", exc)
                self._lost()
            await asyncio.sleep(retry)


@contextlib.asynccontextmanager
async def listening(cache: CredentialCache[T], url: str) -> AsyncIterator[CredentialCache[T]]:
    """Run `cache`'s listener for the duration of the block; wait (briefly) until it listens."""
    task = asyncio.create_task(cache.listen(url), name="memql-credential-cache")
    try:
        for _ in range(50):
            if cache.listening or task.done():
                break
            await asyncio.sleep(0.02)
        yield cache
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
