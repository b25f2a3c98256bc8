"""The canonical form of an app user id, the same whichever credential carries it.

An API key's `X-User-Id` header, a JWT's `sub`, a websocket's `connection_init` payload and an
MCP request all name users; one user must have one spelling, or one person's memories split in
two and a crafted spelling reads another's. So every id is NFC-normalised (a precomposed `å` and
`a` + combining ring are one user), and whatever could make two spellings look alike is refused
rather than repaired: surrounding whitespace (an identity provider's `" jay "` and `"jay"` may
be two people; memql must not merge them), control and format characters, lone surrogates and
line separators (ids end up in logs and events).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from memql.errors import Unauthenticated

MAX_CHARS = 256
# control, format (zero-width, bidi overrides), lone surrogate, line and paragraph separators
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

USER_ID_HEADER = "x-user-id"
AUTHORIZATION = "authorization"
# the headers that carry credentials: each may appear once
CREDENTIAL_HEADERS = (AUTHORIZATION, USER_ID_HEADER)


def canonical_user_id(raw: str) -> str:
    """`raw` in NFC; raises Unauthenticated when it is empty, longer than 256 characters, has
    whitespace around it, or holds a control or format character, a lone surrogate or a line
    separator."""
    if any(unicodedata.category(c) in _REFUSED_CATEGORIES for c in raw):
        raise Unauthenticated(
            "the user id must not hold control or format characters or line breaks"
        )
    if raw != raw.strip():
        raise Unauthenticated("the user id must not begin or end with whitespace")
    user_id = unicodedata.normalize("NFC", raw)
    if not 1 <= len(user_id) <= MAX_CHARS:
        raise Unauthenticated(f"the user id must be 1..{MAX_CHARS} characters")
    return user_id


def credential_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The credential headers among `headers` (names in any case), each at most once: a second
    `Authorization` or `X-User-Id` is refused, never silently preferred."""
    found: dict[str, str] = {}
    for name, value in headers:
        lowered = name.lower()
        if lowered not in CREDENTIAL_HEADERS:
            continue
        if lowered in found:
            raise Unauthenticated(f"send one `{_display(lowered)}` header, not several")
        found[lowered] = value
    return found


def http_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """An HTTP request's credential headers as text. ASGI hands over bytes, which Starlette reads
    as latin-1; credentials are read as UTF-8 (a UTF-8 `X-User-Id: ålice` read as latin-1 would
    be the user `Ã¥lice`). Raises Unauthenticated for one that is not valid UTF-8."""
    pairs: list[tuple[str, str]] = []
    for name_bytes, value_bytes in raw:
        name = name_bytes.decode("latin-1").lower()
        if name not in CREDENTIAL_HEADERS:
            continue
        try:
            pairs.append((name, value_bytes.decode("utf-8")))
        except UnicodeDecodeError:
            raise Unauthenticated(f"the `{_display(name)}` header is not valid UTF-8") from None
    return pairs


def _display(name: str) -> str:
    return "X-User-Id" if name == USER_ID_HEADER else "Authorization"
