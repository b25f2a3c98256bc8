"""`memql.webhooks.backoff`: an endpoint that keeps failing waits twice as long after each
failure, up to the most, and a little less at random, so endpoints that failed together do not
retry together."""

from __future__ import annotations

import pytest

from memql.webhooks.backoff import Backoff

SAMPLES = 200


@pytest.mark.parametrize(
    ("backoff", "failures", "base"),
    [
        (Backoff(), 1, 1.0),
        (Backoff(), 2, 2.0),
        (Backoff(), 3, 4.0),
        (Backoff(), 6, 32.0),
        (Backoff(), 7, 60.0),  # 64 s, held to the most
        (Backoff(), 10**6, 60.0),  # no overflow however long it has failed
        (Backoff(first=0.5, most=3.0), 1, 0.5),
        (Backoff(first=0.5, most=3.0), 3, 2.0),
        (Backoff(first=0.5, most=3.0), 4, 3.0),
    ],
)
def test_each_failure_doubles_the_wait_up_to_the_most_less_a_quarter_at_most(
    backoff: Backoff, failures: int, base: float
):
    delays = [backoff.delay(failures) for _ in range(SAMPLES)]
    assert all(0.75 * base <= d <= base for d in delays)
    # spread over the whole quarter (each bound misses 200 draws with odds below 1e-19)
    assert min(delays) < 0.8 * base and max(delays) > 0.95 * base
