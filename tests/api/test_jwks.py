"""JWKS rotation against a real local JWKS server that rotates its keys: a token signed with a
newly published `kid` is accepted without waiting for the cache to expire, and unknown `kid`s
fetch the JWKS at most once per refetch interval (a clock the test moves stands in for time)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from memql.access.jwt import JwksKeys, JwtVerifier
from memql.db import tenants
from memql.errors import Unauthenticated
from memql.model import JwtConfig
from memql.testing import GraphQLClient, make_tenant


class RotatingJwks:
    """An app's JWKS endpoint over real HTTP: `publish` replaces the keys it serves; `requests`
    counts the fetches it answered."""

    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.requests = 0
        jwks = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                jwks.requests += 1
                body = json.dumps({"keys": jwks.public_keys()}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/.well-known/jwks.json"

    def public_keys(self) -> list[dict[str, str]]:
        return [
            {**json.loads(RSAAlgorithm.to_jwk(k.public_key())), "kid": kid, "alg": "RS256"}
            for kid, k in self.keys.items()
        ]

    def publish(self, *kids: str) -> None:
        self.keys = {kid: self.keys.get(kid) or new_key() for kid in kids}

    def sign(self, kid: str, claims: dict[str, object]) -> str:
        return jwt.encode(claims, self.keys[kid], algorithm="RS256", headers={"kid": kid})


_KEYS: list[rsa.RSAPrivateKey] = []


def new_key() -> rsa.RSAPrivateKey:
    # a few RSA keys serve every test: generating one costs ~0.1-1 s
    if len(_KEYS) < 4:
        _KEYS.append(rsa.generate_private_key(public_exponent=65537, key_size=2048))
        return _KEYS[-1]
    _KEYS.append(_KEYS.pop(0))
    return _KEYS[-1]


@pytest.fixture
def jwks() -> Iterator[RotatingJwks]:
    server = RotatingJwks()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


CONFIG_ISSUER = "https://app.example"


def claims(sub: str = "dana") -> dict[str, object]:
    return {"iss": CONFIG_ISSUER, "aud": "memql", "sub": sub, "exp": int(time.time()) + 600}


@pytest.fixture
def verifier(jwks) -> tuple[JwtVerifier, JwtConfig, Clock]:
    clock = Clock()
    verifier = JwtVerifier()
    verifier._jwks[jwks.url] = JwksKeys(jwks.url, clock=clock)
    return verifier, JwtConfig(CONFIG_ISSUER, "memql", None, jwks.url), clock


async def test_a_newly_published_kid_is_accepted_before_the_cache_expires(jwks, verifier):
    check, config, clock = verifier
    jwks.publish("k1")
    assert await check.subject(jwks.sign("k1", claims()), config) == "dana"
    assert jwks.requests == 1

    # the app rotates: k2 replaces k1, 40 s later (the cache would keep k1 for 300 s)
    retired = jwks.sign("k1", claims())
    jwks.publish("k2")
    clock.now += 40
    assert await check.subject(jwks.sign("k2", claims("erin")), config) == "erin"
    assert jwks.requests == 2
    # k1 is gone from the refreshed set: its tokens are refused from now on (with the answer an
    # unknown issuer gets: it does not tell which issuers and keys are trusted)
    with pytest.raises(Unauthenticated, match="the token is not valid"):
        await check.subject(retired, config)


async def test_unknown_kids_fetch_the_jwks_at_most_once_per_interval(jwks, verifier):
    check, config, clock = verifier
    jwks.publish("k1")
    await check.subject(jwks.sign("k1", claims()), config)
    assert jwks.requests == 1

    # within 30 s of the last fetch, no made-up kid reaches the JWKS endpoint
    clock.now += 10
    for _ in range(20):
        forged = jwt.encode(
            claims(), _KEYS[0], algorithm="RS256", headers={"kid": uuid.uuid4().hex}
        )
        with pytest.raises(Unauthenticated):
            await check.subject(forged, config)
    assert jwks.requests == 1

    # a key published now is found on the first unknown kid after the interval, once
    jwks.publish("k1", "k2")
    clock.now += 25
    for _ in range(5):
        assert await check.subject(jwks.sign("k2", claims()), config) == "dana"
    assert jwks.requests == 2
    # known kids never refetch before the cache's lifespan ends, then once
    clock.now += 200
    await check.subject(jwks.sign("k1", claims()), config)
    assert jwks.requests == 2
    clock.now += 100
    await check.subject(jwks.sign("k1", claims()), config)
    assert jwks.requests == 3


async def test_a_jwks_outage_keeps_the_keys_already_known(jwks, verifier):
    check, config, clock = verifier
    jwks.publish("k1")
    token = jwks.sign("k1", claims())
    await check.subject(token, config)
    jwks.httpd.shutdown()
    jwks.httpd.server_close()
    clock.now += 400  # past the lifespan: the refetch fails
    assert await check.subject(token, config) == "dana"


async def test_a_rotated_key_works_through_graphql(http, database_url, jwks):
    """End to end: the server's own verifier, a project trusting the rotating JWKS."""
    tenant = await make_tenant(database_url)
    issuer = f"https://{tenant.project_name}.example"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await tenants.set_project_jwt(
            conn, tenant.project_name, JwtConfig(issuer, "memql", None, jwks.url)
        )
    jwks.publish("k1", "k2")
    token = jwks.sign("k2", {**claims("gil"), "iss": issuer})
    viewer = (await GraphQLClient(http, token, None).ok("{ viewer { userId } }"))["viewer"]
    assert viewer == {"userId": "gil"}
    assert jwks.requests == 1
