"""Operators: who may use the admin API. An operator's credential is a token of its own
(`mqo_...`), never a project's API key or a browser token; the server knows only each token's
SHA-256 and the operator's name (`MEMQL_ADMIN_TOKENS`), and that name is what the audit log
records with every change the operator makes."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from memql.access.credentials import KEY_PREFIX, bearer_token
from memql.errors import Unauthenticated
from memql.settings import OPERATOR_NAME, OperatorToken

TOKEN_PREFIX = "mqo_"

NEEDED = "the admin API needs `Authorization: Bearer <operator token>` (MEMQL_ADMIN_TOKENS)"
UNKNOWN = "the operator token is unknown: it is not listed in MEMQL_ADMIN_TOKENS"
NOT_A_PROJECT_KEY = (
    "a project API key is not an operator credential: the admin API takes an operator token"
    " (memql admin-token NAME, listed in MEMQL_ADMIN_TOKENS)"
)
NOT_A_BROWSER_TOKEN = (
    "a browser token (JWT) is not an operator credential: the admin API takes an operator"
    " token (memql admin-token NAME, listed in MEMQL_ADMIN_TOKENS)"
)


@dataclass(frozen=True)
class Operator:
    """An operator the admin API identified."""

    name: str


def new_token() -> str:
    """A new operator token: 256 random bits, shown once and never stored."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> bytes:
    # tokens carry 256 random bits, so a fast hash is enough: there is nothing to brute-force
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def valid_name(name: str) -> bool:
    return OPERATOR_NAME.fullmatch(name) is not None


def setting_entry(name: str, token: str) -> str:
    """The entry of `MEMQL_ADMIN_TOKENS` that lets `token` in as the operator `name`."""
    return f"{name}:sha256:{digest(token).hex()}"


class Operators:
    """The operators a server lets in (`MEMQL_ADMIN_TOKENS`)."""

    def __init__(self, tokens: Sequence[OperatorToken]) -> None:
        self._tokens = tuple(tokens)

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def identify(self, authorization: Sequence[str]) -> Operator:
        """The operator whose token the request's `Authorization` headers carry (exactly one,
        `Bearer <token>`), or Unauthenticated saying what was wrong. A project's API key and a
        browser token are refused by their shape, before anything looks them up. The token's
        SHA-256 is compared with every configured one in constant time, all of them each time,
        so the answer's timing tells nothing of which (or how much of one) matched."""
        if len(authorization) != 1:
            raise Unauthenticated(NEEDED if not authorization else "send one Authorization header")
        token = bearer_token(authorization[0])
        if token is None:
            raise Unauthenticated(NEEDED)
        if token.startswith(KEY_PREFIX):
            raise Unauthenticated(NOT_A_PROJECT_KEY)
        if token.count(".") == 2:
            raise Unauthenticated(NOT_A_BROWSER_TOKEN)
        given = digest(token)
        found: OperatorToken | None = None
        for known in self._tokens:
            if hmac.compare_digest(given, known.digest) and found is None:
                found = known
        if found is None:
            raise Unauthenticated(UNKNOWN)
        return Operator(found.name)
