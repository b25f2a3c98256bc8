"""Credentials of live streams, checked again together: one pass per interval for every stream
of the instance, one lookup per distinct credential (an API key serving a thousand users is
looked up once), instead of one lookup per subscriber.

A stream registers what it subscribed with (`Recheck`) and its scopes; when a pass finds the
credentials refused, or the grant no longer reading a subscribed scope, the stream is told
(`Watch.failure`) and woken, and ends with that error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass

from memql.errors import CredentialsUnavailable, Forbidden, MemqlError
from memql.model import Principal, Scope

log = logging.getLogger(__name__)

# credentials are (header name, value) pairs, as `Authenticator.authenticate` takes them
Credentials = list[tuple[str, str]]
CheckMany = Callable[[Sequence[Credentials]], Awaitable[list[Principal | MemqlError]]]


@dataclass(frozen=True)
class Recheck:
    """How to check one stream's credentials again: `check_many` answers for many credentials
    in one call (streams sharing it are checked together), `credentials` are this stream's."""

    check_many: CheckMany
    credentials: Credentials


class Watch:
    def __init__(self, recheck: Recheck, scopes: Sequence[Scope], wake: Callable[[], None]) -> None:
        self.recheck = recheck
        self.scopes = scopes
        self.wake = wake
        self.failure: MemqlError | None = None

    def judge(self, outcome: Principal | MemqlError) -> None:
        if isinstance(outcome, MemqlError):
            self.failure = outcome
        else:
            lost = [s.value for s in self.scopes if not outcome.grant.for_scope(s).can_read]
            if not lost:
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

    @contextlib.contextmanager
    def watch(
        self, recheck: Recheck, scopes: Sequence[Scope], wake: Callable[[], None]
    ) -> Iterator[Watch]:
        w = Watch(recheck, scopes, wake)
        self._watches[w] = None
        try:
            yield w
        finally:
            self._watches.pop(w, None)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.check_all()

    async def check_all(self) -> None:
        """One pass: every live stream's credentials, one call per checker."""
        groups: dict[CheckMany, list[Watch]] = {}
        for w in list(self._watches):
            if w.failure is None:
                groups.setdefault(w.recheck.check_many, []).append(w)
        for check_many, watches in groups.items():
            try:
                outcomes = await check_many([w.recheck.credentials for w in watches])
            except MemqlError as exc:
                outcomes = [exc] * len(watches)
            except Exception:
                # fail closed: a stream whose credentials cannot be checked ends
                log.exception("checking the credentials of live streams failed")
                failed = CredentialsUnavailable("credentials cannot be checked right now")
                outcomes = [failed] * len(watches)
            for w, outcome in zip(watches, outcomes, strict=True):
                w.judge(outcome)
