"""Request rates per credential and per project: token buckets kept in this instance's memory.

Each authenticated request takes one token from its credential's bucket (an API key; a browser
token's project and user) and one from its project's. A bucket holds `burst` tokens and refills
at `rate` a second; an empty one refuses with the seconds until its next token
(`RateLimited`: HTTP 429 with `Retry-After`). In memory and per instance, on purpose: a check
costs no round trip and Redis being away cannot refuse or admit anybody; with N instances
behind a balancer a caller gets up to N times the rate (divide the rate by N where it must be
exact)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from memql.errors import RateLimited

# buckets kept before full ones (idle callers) are forgotten
_KEEP = 10_000


class TokenBuckets:
    """One bucket per key; `rate` tokens a second, at most `burst` kept."""

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst = rate, max(1.0, burst)
        self._clock = clock
        # key -> (tokens, when counted)
        self._buckets: dict[Hashable, tuple[float, float]] = {}

    def _tokens(self, key: Hashable, now: float) -> float:
        tokens, then = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + (now - then) * self.rate)

    def wait(self, key: Hashable) -> float:
        """Seconds until `key` may take a token (0: now)."""
        tokens = self._tokens(key, self._clock())
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, key: Hashable) -> None:
        now = self._clock()
        self._buckets[key] = (self._tokens(key, now) - 1, now)
        if len(self._buckets) > _KEEP:
            self._buckets = {
                k: v for k, v in self._buckets.items() if self._tokens(k, now) < self.burst
            }


@dataclass
class RateLimits:
    """The rates of every credential and project of this instance; None: not limited."""

    per_credential: TokenBuckets | None = None
    per_project: TokenBuckets | None = None

    def admit(self, project_id: uuid.UUID, credential: Hashable) -> None:
        """Take a token for one request of `credential` in `project_id`, or raise RateLimited
        (taking nothing) when either bucket is empty."""
        waits = [
            (buckets.wait(key), what)
            for buckets, key, what in (
                (self.per_credential, credential, "this credential (MEMQL_RATE_PER_KEY)"),
                (self.per_project, project_id, "this project (MEMQL_RATE_PER_PROJECT)"),
            )
            if buckets is not None
        ]
        longest, what = max(waits, default=(0.0, ""))
        if longest > 0:
            raise RateLimited(f"too many requests for {what}; retry later", longest)
        for buckets, key in ((self.per_credential, credential), (self.per_project, project_id)):
            if buckets is not None:
                buckets.take(key)
