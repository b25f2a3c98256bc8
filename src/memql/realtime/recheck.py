"""Credentials of live streams, checked again together: one pass for every stream of the
instance that needs it, one lookup per distinct credential (an API key serving a thousand users
is looked up once), instead of one lookup per subscriber.

A stream registers what it subscribed with (`Recheck`) and its scopes; when a pass finds the
credentials refused, or the grant no longer reading a subscribed scope, the stream is told
(`Watch.failure`) and woken, and ends with that error.

Revocation reaches a stream before its next delivery, not only at the next periodic pass.
Every change that could revoke a credential raises the *credential epoch* in the database
(`tenants.credential_epoch`). A pass reads the epoch before it authenticates, so a stream it
confirms is confirmed *at* that epoch (`Watch.confirmed`): every change counted up to it is
reflected. Every event comes with the epoch of the snapshot it was read in (the relay's read,
a replayed page's: `db.events`), which counts every change that committed before the event.
A stream delivers an event at once when its confirmation is at least the event's epoch (the
steady state: no read at all) and otherwise waits for a pass (`Rechecker.confirm`): a key
revoked before the event committed ends the stream instead of the event reaching it, whether
or not the notification of the change has been heard. The notification (`memql_credentials`,
heard by the credential cache's listener) starts a pass at once, so a stream whose credentials
were revoked ends even when no event follows. A grant that a policy narrows by itself (no
database change) is seen by the periodic pass, every `interval` seconds.

An API key's expiry changes nothing in the database, so no epoch counts it: the stream carries
it instead (`Principal.key_expires_at`, renewed by every pass that confirms the stream). Before
each delivery the stream compares it with the clock (`Watch.refuse_if_expired`: an event
delivered before the expiry was committed before it, so nothing committed after the expiry is
delivered), and a timer wakes the stream at the expiry, so an idle stream ends then too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from memql.db.tenants import KEY_REFUSED
from memql.errors import (
    CredentialsUnavailable,
    Forbidden,
    MemqlError,
    ServiceUnavailable,
    Unauthenticated,
)
from memql.model import Principal, Scope

log = logging.getLogger(__name__)

# credentials are (header name, value) pairs, as `Authenticator.authenticate` takes them
Credentials = list[tuple[str, str]]
CheckMany = Callable[[Sequence[Credentials]], Awaitable[list[Principal | MemqlError]]]
ReadEpoch = Callable[[], Awaitable[int]]
# registers a callback for "credentials may have changed" (the credential cache's `on_change`)
OnChange = Callable[[Callable[[], None]], None]

UNCONFIRMED = -1


@dataclass(frozen=True)
class Recheck:
    """How to check one stream's credentials again: `check_many` answers for many credentials
    in one call (streams sharing it are checked together), `credentials` are this stream's,
    `epoch` reads the credential epoch, and `on_change` (when given) tells when credentials
    may have changed."""

    check_many: CheckMany
    credentials: Credentials
    epoch: ReadEpoch
    on_change: OnChange | None = None


class Watch:
    def __init__(
        self,
        recheck: Recheck,
        scopes: Sequence[Scope],
        wake: Callable[[], None],
        expires_at: datetime | None = None,
    ) -> None:
        self.recheck = recheck
        self.scopes = scopes
        self.wake = wake
        self.failure: MemqlError | None = None
        # the credential epoch at which the credentials were last confirmed
        self.confirmed = UNCONFIRMED
        # when the API key expires, in `time.time()` seconds (None: never)
        self.expires: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.expire_at(expires_at)

    def expire_at(self, when: datetime | None) -> None:
        """Refuse the credentials from `when` on (None: never); the stream is woken then."""
        expires = when.timestamp() if when is not None else None
        if expires == self.expires:
            return
        self.expires = expires
        self.stop()
        self._arm()

    def _arm(self) -> None:
        if self.expires is None or self.failure is not None:
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + self.expires - time.time(), self._expired)

    def _expired(self) -> None:
        self._timer = None
        if self.expires is not None and time.time() < self.expires:
            self._arm()  # the loop's clock ran ahead of the wall clock
        elif self.failure is None:
            self.failure = Unauthenticated(KEY_REFUSED)
            self.wake()

    def refuse_if_expired(self) -> None:
        """Raise the refusal of an expired key when the key has expired by now: called before
        each delivery, so no event committed after the expiry is delivered."""
        if self.expires is not None and time.time() >= self.expires:
            if self.failure is None:
                self.failure = Unauthenticated(KEY_REFUSED)
            raise self.failure

    def stop(self) -> None:
        """Cancel the expiry's timer (the stream has ended)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def judge(self, outcome: Principal | MemqlError, epoch: int) -> None:
        if isinstance(outcome, MemqlError):
            self.failure = outcome
        else:
            lost = [s.value for s in self.scopes if not outcome.grant.for_scope(s).can_read]
            if not lost:
                self.confirmed = max(self.confirmed, epoch)
                # an expiry changed in the database meanwhile (the epoch moved)
                self.expire_at(outcome.key_expires_at)
                return
            self.failure = Forbidden(
                f"the grant no longer allows reading {', '.join(lost)}-scope memories; the"
                " stream is closed",
                reason="grant-withdrawn",
            )
        self.wake()


class Rechecker:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._watches: dict[Watch, None] = {}
        self._hooked: set[OnChange] = set()
        self._pass: asyncio.Task[None] | None = None
        self._pass_full = False
        self._soon = asyncio.Event()
        # why the last pass confirmed nothing, when the database could not answer it
        self._unavailable: ServiceUnavailable | None = None

    @contextlib.contextmanager
    def watch(
        self,
        recheck: Recheck,
        scopes: Sequence[Scope],
        wake: Callable[[], None],
        expires_at: datetime | None = None,
    ) -> Iterator[Watch]:
        """Watch a stream's credentials while the block runs; `expires_at`: its API key's
        expiry (`Principal.key_expires_at`)."""
        w = Watch(recheck, scopes, wake, expires_at)
        self._watches[w] = None
        if recheck.on_change is not None and recheck.on_change not in self._hooked:
            self._hooked.add(recheck.on_change)
            recheck.on_change(self.changed)
        # confirm the new stream while it sets up, so its first delivery need not wait
        self._soon.set()
        try:
            yield w
        finally:
            w.stop()
            self._watches.pop(w, None)

    def changed(self) -> None:
        """Credentials may have changed: check now every stream not confirmed at the current
        epoch (a change that could revoke a credential raised it: every stream)."""
        self._soon.set()

    async def run(self) -> None:
        """Every `interval` seconds a pass over every stream; sooner, as asked, a pass over the
        streams that need one."""
        deadline = time.monotonic() + self.interval
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await self._soon.wait()
            self._soon.clear()
            if time.monotonic() >= deadline:
                self._pass_full = True
                deadline = time.monotonic() + self.interval
            with contextlib.suppress(Exception):
                await self._one_pass()
            if self._pass_full:
                self._soon.set()  # a pass was running: the full one is still to do

    async def confirm(self, watch: Watch, epoch: int) -> None:
        """Return once `watch`'s credentials are confirmed at `epoch` or later, or it has
        failed (`watch.failure`)."""
        while watch.failure is None and watch.confirmed < epoch:
            await self._one_pass()
            unavailable = self._unavailable
            if unavailable is not None and watch.failure is None and watch.confirmed < epoch:
                raise unavailable

    async def _one_pass(self) -> None:
        """Run a pass, or wait for the one running and then run one more if still needed."""
        running = self._pass
        if running is not None and not running.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(running)
            return
        full, self._pass_full = self._pass_full, False
        self._pass = asyncio.ensure_future(self.check_all(full=full))
        await asyncio.shield(self._pass)

    async def check_all(self, *, full: bool = True) -> None:
        """One pass: the streams' credentials (every stream's when `full`, else only those not
        confirmed at the current epoch), one call per checker."""
        self._unavailable = None
        groups: dict[CheckMany, list[Watch]] = {}
        for w in list(self._watches):
            if w.failure is None:
                groups.setdefault(w.recheck.check_many, []).append(w)
        for check_many, watches in groups.items():
            try:
                # read before authenticating: what the pass confirms reflects this epoch
                epoch = await watches[0].recheck.epoch()
                if not full:
                    watches = [w for w in watches if w.confirmed < epoch]
                    if not watches:
                        continue
                outcomes = await check_many([w.recheck.credentials for w in watches])
            except ServiceUnavailable as exc:
                if not full:
                    # nothing is confirmed, and nothing ends: the streams waiting for this
                    # pass deliver nothing meanwhile and try again (`stream._cleared`)
                    self._unavailable = exc
                    continue
                epoch, outcomes = UNCONFIRMED, [exc] * len(watches)
            except MemqlError as exc:
                epoch, outcomes = UNCONFIRMED, [exc] * len(watches)
            except Exception:
                # fail closed: a stream whose credentials cannot be checked ends
                log.exception("checking the credentials of live streams failed")
                failed = CredentialsUnavailable("credentials cannot be checked right now")
                epoch, outcomes = UNCONFIRMED, [failed] * len(watches)
            for w, outcome in zip(watches, outcomes, strict=True):
                w.judge(outcome, epoch)
