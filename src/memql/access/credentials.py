"""API keys: generated once, shown once, stored as a SHA-256 hash with a short display prefix;
optionally named (a label for listings) and given an expiry."""

from __future__ import annotations

import hashlib
import re
import secrets
import unicodedata
from datetime import datetime, timedelta

from memql.errors import BadInput

KEY_PREFIX = "mq_"
DISPLAY_CHARS = len(KEY_PREFIX) + 8


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    # keys carry 256 random bits, so a fast hash is enough: there is nothing to brute-force
    return hashlib.sha256(key.encode()).digest()


def display_prefix(key: str) -> str:
    return key[:DISPLAY_CHARS]


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


NAME_MAX_CHARS = 100
# the longest expiry a key may be given: further than this is "never" (no expiry)
EXPIRY_MAX = timedelta(days=36525)
_DURATION = re.compile(r"([0-9]+)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def key_name(text: str) -> str:
    """An API key's name as given (surrounding whitespace dropped), or BadInput: 1 to 100
    characters, none of them a control, format or line-separator character."""
    name = text.strip()
    if not name or len(name) > NAME_MAX_CHARS:
        raise BadInput(f"a key's name is 1 to {NAME_MAX_CHARS} characters", argument="name")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in name):
        raise BadInput(
            "a key's name holds no control, format or line-separator characters",
            argument="name",
        )
    return name


def expires_in(text: str) -> timedelta:
    """A key's lifetime written as `--expires-in` takes it: whole numbers of s, m, h, d or w,
    one or more (`90s`, `12h`, `30d`, `1d12h`), more than zero and at most 100 years."""
    if not text or _DURATION.sub("", text) or not _DURATION.search(text):
        raise BadInput(
            f"--expires-in {text!r} is not a duration: give whole numbers of s, m, h, d or w,"
            " such as 90s, 12h, 30d or 1d12h",
            argument="expires_in",
        )
    parts = _DURATION.findall(text)
    # more digits than 100 years of seconds have: too long (and no int of thousands of digits)
    digits = len(str(int(EXPIRY_MAX.total_seconds())))
    too_long = any(len(n.lstrip("0")) > digits for n, _ in parts)
    seconds = 0 if too_long else sum(int(n) * _UNITS[unit] for n, unit in parts)
    if not too_long and seconds == 0:
        raise BadInput(f"--expires-in {text!r} is no time at all", argument="expires_in")
    if too_long or seconds > EXPIRY_MAX.total_seconds():
        raise BadInput(
            f"--expires-in {text!r} is more than 100 years: leave it out for a key that"
            " never expires",
            argument="expires_in",
        )
    return timedelta(seconds=seconds)


def expires_at(text: str, now: datetime) -> datetime:
    """A key's expiry written as `--expires-at` takes it: an ISO-8601 instant with its UTC
    offset (`2026-12-31T23:00:00Z`, `2026-12-31T23:00:00+01:00`), after `now` and at most 100
    years after it."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(
            f"--expires-at {text!r} is not an ISO-8601 instant such as 2026-12-31T23:00:00Z",
            argument="expires_at",
        ) from None
    if when.utcoffset() is None:
        raise BadInput(
            f"--expires-at {text!r} has no UTC offset: add one, such as Z or +01:00",
            argument="expires_at",
        )
    if when <= now:
        raise BadInput(f"--expires-at {text!r} is in the past", argument="expires_at")
    if when - now > EXPIRY_MAX:
        raise BadInput(
            f"--expires-at {text!r} is more than 100 years away: leave it out for a key that"
            " never expires",
            argument="expires_at",
        )
    return when
