"""The attack suite: each attempt is denied with the right code and changes nothing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from memql.db import tenants
from memql.model import JwtConfig
from memql.testing import GraphQLClient, make_tenant
from tests.api.test_access import make_token, snapshot
from tests.operations import ERASE, GET, HISTORY, LIST, RESTORE, RETIRE, SAVE, SUPERSEDE

NEW = {"content": "Attacker was here.", "kind": "TOPICAL"}


@pytest.fixture
async def victim(alice, tenant, db):
    """Alice holds a live memory and a retired one; returns their ids and a snapshot check."""
    live = (
        await alice.ok(
            SAVE, {"input": {"content": "Alice's PIN hint: cat's name.", "kind": "TOPICAL"}}
        )
    )["saveMemory"]["memory"]["id"]
    gone = (
        await alice.ok(SAVE, {"input": {"content": "Alice's old address.", "kind": "TOPICAL"}})
    )["saveMemory"]["memory"]["id"]
    await alice.ok(RETIRE, {"id": gone})
    return live, gone, await snapshot(db, tenant.project_id)


@pytest.mark.parametrize(
    ("operation", "variables", "code"),
    [
        (HISTORY, lambda live, gone: {"id": live}, "NOT_FOUND"),
        (SUPERSEDE, lambda live, gone: {"id": live, "input": NEW}, "NOT_FOUND"),
        (RETIRE, lambda live, gone: {"id": live}, "NOT_FOUND"),
        (RESTORE, lambda live, gone: {"id": gone}, "NOT_FOUND"),
        (ERASE, lambda live, gone: {"id": live}, "NOT_FOUND"),
    ],
    ids=["history", "supersede", "retire", "restore", "erase"],
)
async def test_another_users_memory_id_is_not_found(
    bob, victim, tenant, db, operation, variables, code
):
    live, gone, before = victim
    assert await bob.error(operation, variables(live, gone)) == code
    assert await snapshot(db, tenant.project_id) == before


async def test_another_users_memory_id_in_get_is_null(bob, victim, tenant, db):
    live, _, before = victim
    assert (await bob.ok(GET, {"id": live}))["memory"] is None
    assert await snapshot(db, tenant.project_id) == before


async def test_another_projects_memory_id_with_a_valid_key_is_not_found(
    http, victim, tenant, db, database_url
):
    live, gone, before = victim
    intruder = GraphQLClient(http, (await make_tenant(database_url)).key, "alice")
    assert (await intruder.ok(GET, {"id": live}))["memory"] is None
    for operation, variables in [
        (HISTORY, {"id": live}),
        (SUPERSEDE, {"id": live, "input": NEW}),
        (RETIRE, {"id": live}),
        (RESTORE, {"id": gone}),
        (ERASE, {"id": live}),
    ]:
        assert await intruder.error(operation, variables) == "NOT_FOUND"
    assert await snapshot(db, tenant.project_id) == before


async def test_a_revoked_key_is_unauthenticated(alice, victim, tenant, db):
    *_, before = victim
    await db.execute(
        "update api_keys set revoked_at = now() where project_id = %s", (tenant.project_id,)
    )
    assert await alice.error(SAVE, {"input": NEW}) == "UNAUTHENTICATED"
    assert await alice.error(LIST) == "UNAUTHENTICATED"
    assert await snapshot(db, tenant.project_id) == before


# --- browser tokens -----------------------------------------------------------------------


async def test_x_user_id_beside_a_browser_token_is_refused(http, jwt_tenant, db):
    tenant, secret = jwt_tenant
    before = await snapshot(db, tenant.project_id)
    client = GraphQLClient(http, make_token(secret, tenant, sub="alice"), "bob")
    assert await client.error(SAVE, {"input": NEW}) == "UNAUTHENTICATED"
    assert await snapshot(db, tenant.project_id) == before


def forge_none(tenant) -> str:
    header = {"alg": "none", "typ": "JWT"}
    claims = {
        "iss": f"https://{tenant.project_name}.example",
        "aud": "memql",
        "sub": "alice",
        "exp": int(time.time()) + 600,
    }
    return jwt.encode(claims, None, algorithm="none", headers=header)


BAD_TOKENS = {
    "expired": lambda secret, t: make_token(secret, t, exp=int(time.time()) - 3600),
    "wrong signature": lambda secret, t: make_token("another-secret-of-enough-length-123", t),
    "alg none": lambda secret, t: forge_none(t),
    "missing sub": lambda secret, t: make_token(secret, t, sub=None),
    "empty sub": lambda secret, t: make_token(secret, t, sub=""),
    "wrong audience": lambda secret, t: make_token(secret, t, aud="someone-else"),
    "missing exp": lambda secret, t: make_token(secret, t, exp=None),
    "unknown issuer": lambda secret, t: make_token(secret, t, iss="https://evil.example"),
    "not a jwt": lambda secret, t: "a.b.c",
}


@pytest.mark.parametrize("name", list(BAD_TOKENS))
async def test_a_bad_browser_token_is_unauthenticated(http, jwt_tenant, db, name):
    tenant, secret = jwt_tenant
    before = await snapshot(db, tenant.project_id)
    client = GraphQLClient(http, BAD_TOKENS[name](secret, tenant), None)
    assert await client.error(SAVE, {"input": NEW}) == "UNAUTHENTICATED"
    assert await client.error(LIST) == "UNAUTHENTICATED"
    assert await snapshot(db, tenant.project_id) == before


# --- JWKS and key confusion ---------------------------------------------------------------


@pytest.fixture(scope="module")
def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def jwks_url(rsa_key) -> Iterator[str]:
    """The app's public keys, served over real HTTP as a JWKS document."""
    jwk = json.loads(RSAAlgorithm.to_jwk(rsa_key.public_key()))
    body = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/.well-known/jwks.json"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
async def jwks_tenant(database_url, jwks_url):
    tenant = await make_tenant(database_url)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await tenants.set_project_jwt(
            conn,
            tenant.project_name,
            JwtConfig(f"https://{tenant.project_name}.example", "memql", None, jwks_url),
        )
    return tenant


def claims_for(tenant, **overrides):
    return {
        "iss": f"https://{tenant.project_name}.example",
        "aud": "memql",
        "sub": "dana",
        "exp": int(time.time()) + 600,
        **overrides,
    }


async def test_a_token_signed_with_the_apps_jwks_key_is_accepted(http, jwks_tenant, rsa_key):
    token = jwt.encode(claims_for(jwks_tenant), rsa_key, algorithm="RS256", headers={"kid": "k1"})
    viewer = (await GraphQLClient(http, token, None).ok("{ viewer { userId consumer } }"))["viewer"]
    assert viewer == {"userId": "dana", "consumer": "CLIENT"}


async def test_key_confusion_hs256_signed_with_the_public_key_is_refused(
    http, jwks_tenant, rsa_key, db
):
    before = await snapshot(db, jwks_tenant.project_id)
    public_pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # PyJWT refuses to sign HS256 with a PEM key, so build the token by hand as an attacker would
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    payload = b64(json.dumps(claims_for(jwks_tenant)).encode())
    signature = b64(hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest())
    client = GraphQLClient(http, f"{header}.{payload}.{signature}", None)
    assert await client.error(SAVE, {"input": NEW}) == "UNAUTHENTICATED"
    assert await snapshot(db, jwks_tenant.project_id) == before


# --- query shape --------------------------------------------------------------------------


async def test_an_alias_bombed_query_is_refused(alice):
    bomb = "{ " + " ".join(f'a{i}: recall(query: "x") {{ score }}' for i in range(200)) + " }"
    assert await alice.error(bomb) == "BAD_USER_INPUT"


async def test_a_deeply_nested_query_is_refused(alice):
    # the schema's own types have no cycles; introspection's do (type -> fields -> type ...)
    deep = "{ __schema { types { " + "fields { type { " * 4 + "name" + " } }" * 4 + " } } }"
    assert await alice.error(deep) == "BAD_USER_INPUT"


async def test_a_huge_query_is_refused(alice):
    huge = "{ viewer { " + " ".join(["userId"] * 5000) + " } }"
    assert await alice.error(huge) == "BAD_USER_INPUT"


async def test_the_standard_introspection_query_of_graphiql_is_allowed(alice):
    from graphql import get_introspection_query

    data = await alice.ok(get_introspection_query(descriptions=True))
    assert data["__schema"]["queryType"]["name"] == "Query"
