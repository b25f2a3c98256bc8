"""Browser credentials: a JWT signed by the app, verified per project with PyJWT.

A project trusts one issuer, with either an HS256 secret or a JWKS URL, and one audience. The
algorithm allow-list follows the key kind, so `alg: none` and key confusion (an HS256 token
signed with a public key) are refused. Expiry, issuer, audience and `sub` are required.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import jwt

from memql.errors import Unauthenticated

SECRET_ALGORITHMS = ["HS256"]
JWKS_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]
LEEWAY_SECONDS = 30


@dataclass(frozen=True)
class JwtConfig:
    issuer: str
    audience: str
    hs256_secret: str | None
    jwks_url: str | None


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


class JwtVerifier:
    def __init__(self) -> None:
        self._jwks: dict[str, jwt.PyJWKClient] = {}

    async def subject(self, token: str, config: JwtConfig) -> str:
        """Verify `token` for a project; return its `sub`. Raises Unauthenticated."""
        try:
            if config.hs256_secret is not None:
                key: object = config.hs256_secret
                algorithms = SECRET_ALGORITHMS
            else:
                assert config.jwks_url is not None
                client = self._jwks.setdefault(
                    config.jwks_url, jwt.PyJWKClient(config.jwks_url, cache_keys=True, lifespan=300)
                )
                # the first use of a key fetches the JWKS over the network: off the event loop
                signing_key = await asyncio.to_thread(client.get_signing_key_from_jwt, token)
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
        except jwt.PyJWKClientError as exc:
            raise Unauthenticated(f"the token's signing key could not be found: {exc}") from None
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"the token is not valid: {exc}") from None
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject.strip():
            raise Unauthenticated("the token's `sub` must be a non-empty string")
        return subject
