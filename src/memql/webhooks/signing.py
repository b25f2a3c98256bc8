"""How a webhook body is signed, and how a receiver checks it.

Each POST carries `Memql-Timestamp` (Unix seconds when it was sent) and `Memql-Signature`
(`v1=` followed by the hex HMAC-SHA256, keyed by the endpoint's secret, of the timestamp, a dot
and the raw body). Every attempt is signed anew, so a retry after a long outage is fresh. A
receiver recomputes the HMAC over the bytes it received and refuses a timestamp far from its
clock, so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

SIGNATURE_HEADER = "Memql-Signature"
TIMESTAMP_HEADER = "Memql-Timestamp"
# how far from the receiver's clock a timestamp may be (seconds)
DEFAULT_TOLERANCE = 300
_SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return _SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The `Memql-Signature` value of `body` sent at `timestamp`."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify(
    secret: str,
    body: bytes,
    timestamp_header: str | None,
    signature_header: str | None,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> bool:
    """Whether a received request is authentic and fresh. The signature header may list
    several comma-separated signatures; one match is enough."""
    if not timestamp_header or not signature_header:
        return False
    try:
        timestamp = int(timestamp_header)
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = signature(secret, timestamp, body)
    return any(
        hmac.compare_digest(expected, candidate.strip())
        for candidate in signature_header.split(",")
    )
