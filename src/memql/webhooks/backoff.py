"""How long an endpoint that keeps failing waits before its next attempt."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    first: float = 1.0
    most: float = 60.0

    def delay(self, failures: int) -> float:
        """Seconds before the next attempt after `failures` failures in a row (jittered
        downwards, so endpoints that failed together do not retry together)."""
        base = min(self.most, self.first * 2.0 ** min(failures - 1, 30))
        return base * random.uniform(0.75, 1.0)
