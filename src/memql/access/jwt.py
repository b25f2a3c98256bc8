"""Browser credentials: a JWT signed by the app, verified per project with PyJWT.

A project trusts one issuer, with either an HS256 secret or a JWKS URL, and one audience. The
algorithm allow-list follows the key kind, so `alg: none` and key confusion (an HS256 token
signed with a public key) are refused. Expiry, issuer, audience and `sub` are required.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import jwt

from memql.errors import Unauthenticated
from memql.model import JwtConfig

SECRET_ALGORITHMS = ["HS256"]
JWKS_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]
LEEWAY_SECONDS = 30
# a JWKS is fetched again after this long, and on an unknown `kid` at most this often: a new key
# works within seconds of being published, and tokens with made-up `kid`s cannot flood the app
JWKS_LIFESPAN_SECONDS = 300.0
JWKS_REFETCH_SECONDS = 30.0
# one answer for a token from an issuer no project trusts and for one a trusted issuer did not
# sign (or signed for another audience): the answer must not tell which issuers are trusted
INVALID_TOKEN = "the token is not valid"

log = logging.getLogger("memql.access")


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith("mq_")


def unverified_issuer(token: str) -> str:
    """The `iss` claim, read only to find which project's keys verify the token."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise Unauthenticated("the bearer token is not a valid JWT") from None
    issuer = claims.get("iss")
    if not isinstance(issuer, str) or not issuer:
        raise Unauthenticated("the token has no issuer (`iss`)")
    return issuer


class JwksKeys:
    """The signing keys of one JWKS URL, by `kid`.

    Fetched on first use and again once `lifespan` has passed. A `kid` the cached set does not
    know (the app rotated its keys) fetches the set again at once, unless a fetch was tried less
    than `refetch_after` seconds ago. A failed fetch keeps the keys already known. Blocking: call
    it off the event loop.
    """

    def __init__(
        self,
        url: str,
        *,
        lifespan: float = JWKS_LIFESPAN_SECONDS,
        refetch_after: float = JWKS_REFETCH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # PyJWT's client only fetches and parses here: the caching policy is ours
        self._client = jwt.PyJWKClient(url, cache_jwk_set=False, timeout=5)
        self._lifespan = lifespan
        self._refetch_after = refetch_after
        self._clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None  # last successful fetch
        self._tried_at: float | None = None  # last attempt, successful or not
        self._lock = threading.Lock()
        self.fetches = 0

    def key(self, kid: str | None) -> jwt.PyJWK:
        with self._lock:
            now = self._clock()
            stale = self._fetched_at is None or now - self._fetched_at >= self._lifespan
            unknown = kid not in self._keys
            may_retry = self._tried_at is None or now - self._tried_at >= self._refetch_after
            if (stale or unknown) and may_retry:
                self._fetch(now)
            key = self._keys.get(kid) if kid is not None else None
        if key is None:
            raise jwt.PyJWKClientError(f"no key with kid {kid!r} in the JWKS")
        return key

    def _fetch(self, now: float) -> None:
        self._tried_at = now
        self.fetches += 1
        try:
            keys = self._client.get_signing_keys()
        except jwt.PyJWTError:
            if not self._keys:
                raise
            return  # keep serving the keys already known until the JWKS answers again
        self._keys = {key.key_id: key for key in keys if key.key_id is not None}
        self._fetched_at = now


class JwtVerifier:
    def __init__(self) -> None:
        self._jwks: dict[str, JwksKeys] = {}

    def jwks(self, url: str) -> JwksKeys:
        keys = self._jwks.get(url)
        if keys is None:
            keys = self._jwks[url] = JwksKeys(url)
        return keys

    async def subject(self, token: str, config: JwtConfig) -> str:
        """Verify `token` for a project; return its `sub`. Raises Unauthenticated."""
        try:
            if config.hs256_secret is not None:
                key: object = config.hs256_secret
                algorithms = SECRET_ALGORITHMS
            else:
                assert config.jwks_url is not None
                kid = jwt.get_unverified_header(token).get("kid")
                # a fetch of the JWKS goes over the network: off the event loop
                signing_key = await asyncio.to_thread(self.jwks(config.jwks_url).key, kid)
                key = signing_key.key
                algorithms = JWKS_ALGORITHMS
            claims = jwt.decode(
                token,
                key,  # type: ignore[arg-type]
                algorithms=algorithms,
                audience=config.audience,
                issuer=config.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("the token has expired") from None
        except (jwt.PyJWKClientError, jwt.PyJWTError) as exc:
            log.info("refused a token of %s: %s", config.issuer, exc)
            raise Unauthenticated(INVALID_TOKEN) from None
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject.strip():
            raise Unauthenticated("the token's `sub` must be a non-empty string")
        return subject
