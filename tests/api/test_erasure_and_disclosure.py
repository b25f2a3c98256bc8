"""Decisions on erasure and on what one caller learns about others, tested through the real
service: a `client` key never erases; erasing a project memory needs the project read-write
grant; project events do not name the user who made them; a token from an unknown issuer and
a forged one from a trusted issuer get the same answer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import jwt
import pytest

from memql.model import Consumer
from memql.settings import Settings
from memql.testing import GraphQLClient, make_tenant, serving
from tests.operations import ERASE, ERASE_USER, GET, LIST, SAVE, contents
from tests.ws import WsSession, event_cursor

EVENTS = """
subscription Events($scope: MemoryScope, $since: String) {
  memoryEvents(scope: $scope, since: $since) { type scope actorId memory { content } }
}
"""


@pytest.fixture(scope="module")
async def policy_server(database_url, embedder) -> AsyncIterator[str]:
    settings = Settings(database_url=database_url, access_policy="tests.policies:by_user")
    async with serving(settings, embedder) as url:
        yield url


def save(content: str, scope: str = "USER") -> dict:
    return {"input": {"content": content, "kind": "TOPICAL", "scope": scope}}


async def test_a_client_api_key_never_erases(http: httpx.AsyncClient, database_url):
    tenant = await make_tenant(database_url, Consumer.CLIENT)
    dashboard = GraphQLClient(http, tenant.key, "alice")
    saved = await dashboard.ok(SAVE, save("Alice's own note."))
    memory_id = saved["saveMemory"]["memory"]["id"]
    assert await dashboard.error(ERASE, {"id": memory_id}) == "FORBIDDEN"
    assert await dashboard.error(ERASE_USER) == "FORBIDDEN"
    assert contents(await dashboard.ok(LIST)) == ["Alice's own note."]


async def test_erasing_a_project_memory_needs_the_project_read_write_grant(policy_server, tenant):
    async with httpx.AsyncClient(base_url=policy_server, timeout=60) as http:
        owner = GraphQLClient(http, tenant.key, "alice")
        saved = await owner.ok(SAVE, save("The shared release checklist.", "PROJECT"))
        memory_id = saved["saveMemory"]["memory"]["id"]
        reader = GraphQLClient(http, tenant.key, "grant:user=read-write,project=read")
        assert await reader.error(ERASE, {"id": memory_id}) == "FORBIDDEN"
        assert (await owner.ok(GET, {"id": memory_id}))["memory"] is not None
        writer = GraphQLClient(http, tenant.key, "grant:user=read-write,project=read-write")
        assert (await writer.ok(ERASE, {"id": memory_id}))["eraseMemory"]["erased"] == 1
        assert (await owner.ok(GET, {"id": memory_id}))["memory"] is None


async def test_project_events_do_not_name_the_user_who_made_them(server, tenant, alice, bob):
    init = {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice"}
    async with WsSession(server, init, "graphql-transport-ws") as ws:
        op = await ws.start(EVENTS, {"since": await event_cursor(server, init)})
        await bob.ok(SAVE, save("Bob's shared finding.", "PROJECT"))
        first = (await ws.result(op))["data"]["memoryEvents"]
        await alice.ok(SAVE, save("Alice's shared finding.", "PROJECT"))
        second = (await ws.result(op))["data"]["memoryEvents"]
        await alice.ok(SAVE, save("Alice's private finding."))
        third = (await ws.result(op))["data"]["memoryEvents"]
    assert (first["scope"], first["actorId"]) == ("PROJECT", None)
    assert (second["scope"], second["actorId"]) == ("PROJECT", None)
    assert (third["scope"], third["actorId"]) == ("USER", "alice")


async def test_an_unknown_issuer_and_a_forged_token_get_the_same_answer(http, jwt_tenant):
    tenant, secret = jwt_tenant

    def token(issuer: str, key: str) -> str:
        claims = {"iss": issuer, "aud": "memql", "sub": "alice", "exp": int(time.time()) + 600}
        return jwt.encode(claims, key, algorithm="HS256")

    trusted = f"https://{tenant.project_name}.example"
    answers = []
    for bearer in (
        token("https://unknown.example", secret),
        token(trusted, "not-the-project-secret-but-32-bytes-long"),
    ):
        body = await GraphQLClient(http, bearer, None).raw("{ viewer { userId } }")
        answers.append(body["errors"][0])
    assert answers[0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert answers[0]["message"] == answers[1]["message"]
    assert answers[0]["extensions"] == answers[1]["extensions"]
    # a token the trusted issuer did sign still works
    ok = await GraphQLClient(http, token(trusted, secret), None).ok("{ viewer { userId } }")
    assert ok["viewer"]["userId"] == "alice"
