"""API keys: generated once, shown once, stored as a SHA-256 hash with a short display prefix."""

from __future__ import annotations

import hashlib
import secrets

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
