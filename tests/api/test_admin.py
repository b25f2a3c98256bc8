"""The admin API (`/admin/graphql`) through a real client against the real server: off (a 404
like any unknown path) until an operator is configured; missing, bad, unknown and removed
operator tokens, a project's key and a browser token are 401 UNAUTHENTICATED and change
nothing; each operation does what the command line does, through the same service, and is
recorded in the audit log with its operator; bad input is BAD_USER_INPUT, never a 500; the
endpoint has /graphql's headers and body bound, and no CORS."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest

from memql import cli
from memql.access.operators import digest, new_token
from memql.settings import OperatorToken, Settings
from memql.testing import GraphQLClient, make_tenant, serving
from memql.testing.webhooks import webhook_receiver
from tests.operations import LIST, SAVE
from tests.proxy import Proxy

ALICE = new_token()
DEPLOY = new_token()
OPERATORS = (OperatorToken("alice", digest(ALICE)), OperatorToken("deploy-bot", digest(DEPLOY)))
CORS_ORIGIN = "https://app.example"
PATH = "/admin/graphql"

VIEWER = "{ viewer { userId projectName consumer } }"
PROJECT = "id name memoryEnabled createdAt jwt { issuer audience key jwksUrl }"
KEY = "id project projectId prefix name consumer createdAt lastUsedAt expiresAt revokedAt state"
WEBHOOK = "id project url events createdBy ackedCursor pendingCount failures"
AUDIT = "id at actor via action project projectId targetId detail"

CREATE_PROJECT = f"mutation($name: String!) {{ createProject(name: $name) {{ {PROJECT} }} }}"
SET_MEMORY = f"""mutation($name: String!, $on: Boolean!) {{
  setProjectMemory(name: $name, enabled: $on) {{ {PROJECT} }} }}"""
DELETE_PROJECT = f"""mutation($name: String!) {{
  deleteProject(name: $name) {{ project {{ {PROJECT} }} memoryVersions apiKeys webhooks }} }}"""
SET_JWT = f"""mutation($name: String!, $trust: JwtTrustInput!) {{
  setProjectJwt(name: $name, trust: $trust) {{ {PROJECT} }} }}"""
CLEAR_JWT = f"mutation($name: String!) {{ clearProjectJwt(name: $name) {{ {PROJECT} }} }}"
CREATE_KEY = f"""mutation($input: CreateApiKeyInput!) {{
  createApiKey(input: $input) {{ key apiKey {{ {KEY} }} }} }}"""
REVOKE_KEY = f"mutation($id: ID!) {{ revokeApiKey(id: $id) {{ {KEY} }} }}"
KEYS = f"query($project: String) {{ apiKeys(project: $project) {{ {KEY} }} }}"
ADD_WEBHOOK = f"""mutation($input: AddWebhookInput!) {{
  addWebhook(input: $input) {{ secret webhook {{ {WEBHOOK} }} }} }}"""
REMOVE_WEBHOOK = f"mutation($id: ID!) {{ removeWebhook(id: $id) {{ {WEBHOOK} }} }}"
WEBHOOKS = f"query($project: String) {{ webhooks(project: $project) {{ {WEBHOOK} }} }}"
AUDIT_LOG = f"""query($project: String, $first: Int, $before: ID) {{
  auditLog(project: $project, first: $first, before: $before) {{ {AUDIT} }} }}"""
PROJECTS = f"{{ projects {{ {PROJECT} }} }}"
ONE_PROJECT = f"query($name: String!) {{ project(name: $name) {{ {PROJECT} }} }}"


def admin_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "admin_tokens": OPERATORS,
        "webhooks_allow_private": True,
        "cors_origins": (CORS_ORIGIN,),
    }
    return Settings(**{**values, **overrides})


@pytest.fixture(scope="module")
async def admin_server(database_url, embedder) -> AsyncIterator[str]:
    async with serving(admin_settings(database_url), embedder) as url:
        yield url


@pytest.fixture
async def http(admin_server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=admin_server, timeout=60) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def post(
    http: httpx.AsyncClient,
    query: str,
    variables: dict[str, Any] | None = None,
    *,
    token: str | None = ALICE,
) -> httpx.Response:
    headers = {"Content-Type": "application/json", **(bearer(token) if token is not None else {})}
    # escaped ASCII JSON: a lone surrogate travels as `\ud800`, as a client would send it
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    return await http.post(PATH, content=body, headers=headers)


async def ok(http: httpx.AsyncClient, query: str, variables: dict[str, Any] | None = None, *,
             token: str = ALICE) -> dict[str, Any]:  # fmt: skip
    response = await post(http, query, variables, token=token)
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body["errors"]
    data: dict[str, Any] = body["data"]
    return data


async def error(
    http: httpx.AsyncClient, query: str, variables: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The first error of an operation that must fail (HTTP 200, a field's error)."""
    response = await post(http, query, variables)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body.get("errors"), body
    first: dict[str, Any] = body["errors"][0]
    return first


def fresh_name() -> str:
    return f"admin-{uuid.uuid4().hex[:10]}"


async def audit_of(http: httpx.AsyncClient, project: str) -> list[dict[str, Any]]:
    """The project's audit entries, oldest first."""
    entries = (await ok(http, AUDIT_LOG, {"project": project, "first": 1000}))["auditLog"]
    return list(reversed(entries))


async def count(db, sql: str, *args: Any) -> int:
    cur = await db.execute(sql, args)
    (n,) = await cur.fetchone()
    return int(n)


# ---- off by default ---------------------------------------------------------------------------


async def test_without_operators_the_path_is_unknown_a_404_like_any_other(server):
    async with httpx.AsyncClient(base_url=server, timeout=60) as http:
        unknown = await http.post("/no-such-path", json={"query": "{ operator { name } }"})
        for method in ("POST", "GET", "OPTIONS"):
            answer = await http.request(
                method, PATH, json={"query": "{ operator { name } }"}, headers=bearer(ALICE)
            )
            assert answer.status_code == 404, (method, answer.text)
            assert answer.json() == unknown.json()
            assert answer.json()["errors"][0]["extensions"]["code"] == "NOT_FOUND"


# ---- credentials ------------------------------------------------------------------------------


def browser_token() -> str:
    claims = {"iss": "https://x.example", "aud": "memql", "sub": "a", "exp": int(time.time()) + 60}
    return jwt.encode(claims, "a-shared-secret-of-32-bytes-or-more", algorithm="HS256")


REFUSED_HEADERS = {
    "missing": [],
    "bare scheme": [("Authorization", "Bearer")],
    "another scheme": [("Authorization", f"Basic {ALICE}")],
    "unknown token": [("Authorization", f"Bearer {new_token()}")],
    "one character off": [
        ("Authorization", f"Bearer {ALICE[:-1]}{'A' if ALICE[-1] != 'A' else 'B'}")
    ],
    "two headers": [("Authorization", f"Bearer {ALICE}"), ("Authorization", f"Bearer {DEPLOY}")],
    "browser token": [("Authorization", f"Bearer {browser_token()}")],
}


@pytest.mark.parametrize("case", list(REFUSED_HEADERS))
async def test_a_request_without_one_known_operator_token_is_401_and_changes_nothing(
    http, db, case
):
    name = fresh_name()
    response = await http.post(
        PATH,
        json={"query": CREATE_PROJECT, "variables": {"name": name}},
        headers=REFUSED_HEADERS[case],
    )
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    [refusal] = response.json()["errors"]
    assert refusal["extensions"]["code"] == "UNAUTHENTICATED"
    assert ALICE not in response.text and DEPLOY not in response.text
    assert await count(db, "select count(*) from projects where name = %s", name) == 0
    assert await count(db, "select count(*) from admin_audit where project_name = %s", name) == 0


async def test_an_unauthenticated_request_runs_nothing_not_even_introspection(http):
    response = await post(http, "{ __schema { types { name } } }", token=None)
    assert response.status_code == 401 and "__schema" not in response.text
    assert (await ok(http, "{ __schema { queryType { name } } }"))["__schema"]


async def test_a_project_key_is_refused_by_its_shape_and_never_looked_up(http, db, database_url):
    tenant = await make_tenant(database_url)
    response = await post(http, "{ operator { name } }", token=tenant.key)
    assert response.status_code == 401
    assert (
        "project API key is not an operator credential" in response.json()["errors"][0]["message"]
    )
    last_used = "select count(*) from api_keys where project_id = %s and last_used_at is not null"
    assert await count(db, last_used, tenant.project_id) == 0
    # the same key on the memory API is looked up, and marked used: the check above could fail
    async with httpx.AsyncClient(base_url=str(http.base_url), timeout=60) as plain:
        await GraphQLClient(plain, tenant.key, "alice").ok(VIEWER)
    assert await count(db, last_used, tenant.project_id) == 1


async def test_an_operator_token_is_no_credential_on_the_memory_api_or_mcp(http):
    answer = await GraphQLClient(http, ALICE, "alice").error(VIEWER)
    assert answer == "UNAUTHENTICATED"
    mcp = await http.post("/mcp", json={}, headers={**bearer(ALICE), "X-User-Id": "alice"})
    assert mcp.status_code == 401


async def test_each_operator_is_itself_and_a_token_taken_out_of_the_setting_is_refused(
    http, database_url, embedder
):
    assert (await ok(http, "{ operator { name } }"))["operator"] == {"name": "alice"}
    assert (await ok(http, "{ operator { name } }", token=DEPLOY))["operator"]["name"] == (
        "deploy-bot"
    )
    # alice's token revoked: the setting without it, after a restart
    without_alice = admin_settings(database_url, admin_tokens=OPERATORS[1:])
    async with serving(without_alice, embedder) as url, httpx.AsyncClient(base_url=url) as other:
        refused = await post(other, "{ operator { name } }")
        assert refused.status_code == 401
        assert refused.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
        assert (await ok(other, "{ operator { name } }", token=DEPLOY))["operator"]["name"]


async def test_no_token_is_logged(http, database_url, caplog):
    tenant = await make_tenant(database_url)
    caplog.set_level(logging.DEBUG)
    await post(http, "{ operator { name } }", token=new_token())
    await post(http, "{ operator { name } }", token=tenant.key)
    await ok(http, "{ operator { name } }")
    await ok(http, CREATE_KEY, {"input": {"project": tenant.project_name}})
    assert "refused an admin API request" in caplog.text  # the refusals are logged...
    for secret in (ALICE, tenant.key):
        assert secret not in caplog.text  # ...without what was sent


# ---- projects ---------------------------------------------------------------------------------


async def test_a_project_is_created_listed_disabled_enabled_and_deleted(http, db, database_url):
    name = fresh_name()
    created = (await ok(http, CREATE_PROJECT, {"name": name}))["createProject"]
    assert created["name"] == name and created["memoryEnabled"] and created["jwt"] is None
    assert created in (await ok(http, PROJECTS))["projects"]
    assert (await ok(http, ONE_PROJECT, {"name": name}))["project"] == created
    assert (await error(http, CREATE_PROJECT, {"name": name}))["extensions"]["code"] == "CONFLICT"

    made = (await ok(http, CREATE_KEY, {"input": {"project": name}}))["createApiKey"]
    user = GraphQLClient(http, made["key"], "alice")
    await user.ok(SAVE, {"input": {"content": "Alice likes admin tests.", "kind": "TOPICAL"}})

    off = (await ok(http, SET_MEMORY, {"name": name, "on": False}))["setProjectMemory"]
    assert off["memoryEnabled"] is False
    refused = await http.post("/graphql", json={"query": VIEWER}, headers=user.headers())
    assert refused.status_code == 404  # a project without memory reveals nothing
    assert (await ok(http, SET_MEMORY, {"name": name, "on": True}))["setProjectMemory"][
        "memoryEnabled"
    ]
    assert (await user.ok(VIEWER))["viewer"]["projectName"] == name

    gone = (await ok(http, DELETE_PROJECT, {"name": name}))["deleteProject"]
    assert gone == {
        "project": {**created, "memoryEnabled": True},
        "memoryVersions": 1,
        "apiKeys": 1,
        "webhooks": 0,
    }
    assert await count(db, "select count(*) from projects where name = %s", name) == 0
    assert await count(db, "select count(*) from memories where project_id = %s",
                       uuid.UUID(created["id"])) == 0  # fmt: skip
    assert await user.error(VIEWER) == "UNAUTHENTICATED"
    assert (await error(http, ONE_PROJECT, {"name": name}))["extensions"]["code"] == "NOT_FOUND"
    assert (await error(http, DELETE_PROJECT, {"name": name}))["extensions"]["code"] == "NOT_FOUND"

    # the record outlives the project, in order, each by its operator through the admin API
    entries = await audit_of(http, name)
    assert [e["action"] for e in entries] == [
        "project.created",
        "key.created",
        "project.memory_disabled",
        "project.memory_enabled",
        "project.deleted",
    ]
    assert {(e["actor"], e["via"], e["projectId"]) for e in entries} == {
        ("alice", "ADMIN_API", created["id"])
    }
    assert entries[-1]["detail"] == {"memory_versions": 1, "api_keys": 1, "webhooks": 0}


# ---- keys -------------------------------------------------------------------------------------


async def test_a_key_is_made_with_a_name_a_consumer_and_an_expiry_listed_with_its_use_and_revoked(
    http, database_url
):
    tenant = await make_tenant(database_url)
    before = datetime.now(UTC)
    made = (
        await ok(
            http,
            CREATE_KEY,
            {
                "input": {
                    "project": tenant.project_name,
                    "name": "dashboard",
                    "consumer": "CLIENT",
                    "expiresInSeconds": 3600,
                }
            },
        )
    )["createApiKey"]
    key, record = made["key"], made["apiKey"]
    assert key.startswith("mq_") and record["prefix"] == key[:11]
    assert (record["name"], record["consumer"], record["state"]) == (
        "dashboard",
        "CLIENT",
        "ACTIVE",
    )
    assert record["lastUsedAt"] is None and record["project"] == tenant.project_name
    expires = datetime.fromisoformat(record["expiresAt"])
    assert abs(expires - before - timedelta(hours=1)) < timedelta(seconds=30)

    viewer = (await GraphQLClient(http, key, "carol").ok(VIEWER))["viewer"]
    assert viewer == {"userId": "carol", "projectName": tenant.project_name, "consumer": "CLIENT"}
    listed = await keys_of(http, tenant.project_name)
    # make_tenant's key, then this one: by age
    assert len(listed) == 2 and listed[1]["id"] == record["id"]
    used = listed[1]
    assert used["lastUsedAt"] is not None
    assert key not in json.dumps(listed)  # the key itself is never listed

    revoked = (await ok(http, REVOKE_KEY, {"id": record["id"]}))["revokeApiKey"]
    assert revoked["state"] == "REVOKED" and revoked["revokedAt"] is not None
    assert await GraphQLClient(http, key, "carol").error(VIEWER) == "UNAUTHENTICATED"
    again = await error(http, REVOKE_KEY, {"id": record["id"]})
    assert again["extensions"]["code"] == "NOT_FOUND"

    entries = await audit_of(http, tenant.project_name)
    assert [(e["action"], e["targetId"]) for e in entries] == [
        ("key.created", record["id"]),
        ("key.revoked", record["id"]),
    ]
    assert entries[0]["detail"] == {
        "name": "dashboard",
        "consumer": "client",
        "prefix": record["prefix"],
        "expires_at": expires.astimezone(UTC).isoformat(),
    }


async def keys_of(http: httpx.AsyncClient, project: str) -> list[dict[str, Any]]:
    return list((await ok(http, KEYS, {"project": project}))["apiKeys"])


async def test_an_expiry_at_an_instant_is_kept_and_a_past_one_lists_as_expired(
    http, db, database_url
):
    tenant = await make_tenant(database_url)
    at = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    made = await ok(
        http, CREATE_KEY, {"input": {"project": tenant.project_name, "expiresAt": at.isoformat()}}
    )
    record = made["createApiKey"]["apiKey"]
    assert datetime.fromisoformat(record["expiresAt"]) == at
    await db.execute(
        "update api_keys set expires_at = now() - interval '1 second' where id = %s",
        (uuid.UUID(record["id"]),),
    )
    [listed] = [k for k in await keys_of(http, tenant.project_name) if k["id"] == record["id"]]
    assert listed["state"] == "EXPIRED"


BAD_KEYS = {
    "past": {"expiresAt": "2020-01-01T00:00:00Z"},
    "no offset": {"expiresAt": "2030-01-01T00:00:00"},
    "not an instant": {"expiresAt": "next tuesday"},
    "too far": {"expiresAt": "2999-01-01T00:00:00Z"},
    "both": {"expiresAt": "2030-01-01T00:00:00Z", "expiresInSeconds": 60},
    "no time": {"expiresInSeconds": 0},
    "negative": {"expiresInSeconds": -5},
    "long name": {"name": "n" * 101},
    "blank name": {"name": "  "},
    "control in name": {"name": "a\u0007b"},
    "lone surrogate": {"name": "a\ud800b"},
    "unknown consumer": {"consumer": "ROBOT"},
    "unknown field": {"scopes": ["all"]},
}


@pytest.mark.parametrize("case", list(BAD_KEYS))
async def test_a_bad_key_input_is_bad_user_input_and_makes_no_key(http, db, database_url, case):
    tenant = await make_tenant(database_url)
    response = await post(
        http, CREATE_KEY, {"input": {"project": tenant.project_name, **BAD_KEYS[case]}}
    )
    assert response.status_code == 200, response.text
    [refusal] = response.json()["errors"]
    assert refusal["extensions"]["code"] == "BAD_USER_INPUT", refusal
    keys = "select count(*) from api_keys where project_id = %s"
    assert await count(db, keys, tenant.project_id) == 1  # make_tenant's own
    audit = "select count(*) from admin_audit where project_id = %s"
    assert await count(db, audit, tenant.project_id) == 0


async def test_a_key_of_an_unknown_project_or_a_bad_id_is_refused_with_a_code(http):
    unknown = await error(http, CREATE_KEY, {"input": {"project": fresh_name()}})
    assert unknown["extensions"]["code"] == "NOT_FOUND"
    assert (await error(http, REVOKE_KEY, {"id": "nope"}))["extensions"]["code"] == (
        "BAD_USER_INPUT"
    )
    missing = await error(http, REVOKE_KEY, {"id": str(uuid.uuid4())})
    assert missing["extensions"]["code"] == "NOT_FOUND"


# ---- browser-token trust ----------------------------------------------------------------------


def signed(secret: str, issuer: str) -> str:
    claims = {"iss": issuer, "aud": "memql", "sub": "dora", "exp": int(time.time()) + 600}
    return jwt.encode(claims, secret, algorithm="HS256")


async def test_a_project_trusts_an_issuers_tokens_then_none_and_no_secret_is_shown(
    http, database_url
):
    tenant = await make_tenant(database_url)
    secret = "an-hs256-secret-of-32-bytes-or-more-" + uuid.uuid4().hex
    issuer = f"https://{tenant.project_name}.example"
    trust = {"issuer": issuer, "audience": "memql", "hs256Secret": secret}
    answer = await post(http, SET_JWT, {"name": tenant.project_name, "trust": trust})
    assert secret not in answer.text
    project = answer.json()["data"]["setProjectJwt"]
    assert project["jwt"] == {
        "issuer": issuer,
        "audience": "memql",
        "key": "hs256",
        "jwksUrl": None,
    }
    browser = GraphQLClient(http, signed(secret, issuer), None)
    assert (await browser.ok(VIEWER))["viewer"]["consumer"] == "CLIENT"

    # one issuer belongs to one project
    other = await make_tenant(database_url)
    taken = await error(http, SET_JWT, {"name": other.project_name, "trust": trust})
    assert taken["extensions"]["code"] == "CONFLICT"

    cleared = (await ok(http, CLEAR_JWT, {"name": tenant.project_name}))["clearProjectJwt"]
    assert cleared["jwt"] is None
    assert await browser.error(VIEWER) == "UNAUTHENTICATED"

    entries = await audit_of(http, tenant.project_name)
    assert [e["action"] for e in entries] == ["project.jwt_trusted", "project.jwt_untrusted"]
    assert entries[0]["detail"] == {
        "issuer": issuer,
        "audience": "memql",
        "key": "hs256",
        "jwks_url": None,
    }
    assert secret not in json.dumps(await audit_of(http, other.project_name) + entries)


@pytest.mark.parametrize(
    "trust",
    [
        {"issuer": "https://i.example", "audience": "memql"},
        {
            "issuer": "https://i.example",
            "audience": "memql",
            "hs256Secret": "s",
            "jwksUrl": "https://i.example/jwks",
        },
        {"issuer": "", "audience": "memql", "hs256Secret": "s"},
        {"issuer": "https://i.example", "audience": "memql", "jwksUrl": "ftp://i.example/k"},
        {"issuer": "https://i.example\u0000", "audience": "memql", "hs256Secret": "s"},
    ],
    ids=["no key", "two keys", "no issuer", "not http", "nul"],
)
async def test_a_bad_trust_is_bad_user_input_and_changes_nothing(http, database_url, trust):
    tenant = await make_tenant(database_url)
    refusal = await error(http, SET_JWT, {"name": tenant.project_name, "trust": trust})
    assert refusal["extensions"]["code"] == "BAD_USER_INPUT", refusal
    project = (await ok(http, ONE_PROJECT, {"name": tenant.project_name}))["project"]
    assert project["jwt"] is None
    assert await audit_of(http, tenant.project_name) == []


# ---- webhooks ---------------------------------------------------------------------------------


async def test_a_webhook_is_added_listed_with_its_state_and_removed(http, database_url):
    tenant = await make_tenant(database_url)
    async with webhook_receiver() as receiver:
        url = f"{receiver.url}/admin"
        added = (
            await ok(
                http,
                ADD_WEBHOOK,
                {
                    "input": {
                        "project": tenant.project_name,
                        "url": url,
                        "events": ["memory.created"],
                    }
                },
            )
        )["addWebhook"]
        secret, webhook = added["secret"], added["webhook"]
        assert secret.startswith("whsec_")
        assert (webhook["url"], webhook["events"]) == (url, ["memory.created"])
        assert webhook["createdBy"] == "operator alice (admin-api)"
        await GraphQLClient(http, tenant.key, "alice").ok(
            SAVE, {"input": {"content": "Alice hooks.", "kind": "TOPICAL"}}
        )
        listed = (await ok(http, WEBHOOKS, {"project": tenant.project_name}))["webhooks"]
        assert [w["id"] for w in listed] == [webhook["id"]]
        assert listed[0]["pendingCount"] in (0, 1)  # delivered, or about to be
        assert secret not in json.dumps(listed)

        removed = (await ok(http, REMOVE_WEBHOOK, {"id": webhook["id"]}))["removeWebhook"]
        assert removed["id"] == webhook["id"]
        assert (await ok(http, WEBHOOKS, {"project": tenant.project_name}))["webhooks"] == []
        gone = await error(http, REMOVE_WEBHOOK, {"id": webhook["id"]})
        assert gone["extensions"]["code"] == "NOT_FOUND"

    entries = await audit_of(http, tenant.project_name)
    assert [(e["action"], e["targetId"]) for e in entries] == [
        ("webhook.added", webhook["id"]),
        ("webhook.removed", webhook["id"]),
    ]
    assert entries[0]["detail"] == {"url": url, "events": ["memory.created"]}
    assert secret not in json.dumps(entries)


@pytest.mark.parametrize(
    "bad",
    [
        {"url": "ftp://hooks.example/in"},
        {"url": "not a url"},
        {"url": "https://hooks.example/in\u0000"},
        {"url": "https://hooks.example/in", "events": ["memory.deleted"]},
        {"url": "https://hooks.example/in", "events": []},
    ],
    ids=["scheme", "not a url", "nul", "unknown event", "no events"],
)
async def test_a_bad_webhook_is_bad_user_input_and_adds_nothing(http, database_url, bad):
    tenant = await make_tenant(database_url)
    refusal = await error(http, ADD_WEBHOOK, {"input": {"project": tenant.project_name, **bad}})
    assert refusal["extensions"]["code"] == "BAD_USER_INPUT", refusal
    assert (await ok(http, WEBHOOKS, {"project": tenant.project_name}))["webhooks"] == []
    assert await audit_of(http, tenant.project_name) == []


# ---- the audit log ----------------------------------------------------------------------------


async def test_the_audit_log_names_each_operator_and_the_command_lines_user(
    http, database_url, monkeypatch, capsys
):
    name = fresh_name()
    await ok(http, CREATE_PROJECT, {"name": name})
    made = await ok(http, CREATE_KEY, {"input": {"project": name}}, token=DEPLOY)
    key_id = made["createApiKey"]["apiKey"]["id"]

    monkeypatch.setenv("DATABASE_URL", database_url)

    async def memql(*argv: str) -> tuple[int, str]:
        status = await asyncio.to_thread(cli.main, list(argv))
        return status, capsys.readouterr().out

    assert (await memql("keys", "revoke", key_id))[0] == 0
    assert (await memql("projects", "disable", name))[0] == 0

    entries = await audit_of(http, name)
    from memql.service.admin import Actor

    user = Actor.command_line().name
    assert [(e["actor"], e["via"], e["action"]) for e in entries] == [
        ("alice", "ADMIN_API", "project.created"),
        ("deploy-bot", "ADMIN_API", "key.created"),
        (user, "CLI", "key.revoked"),
        (user, "CLI", "project.memory_disabled"),
    ]
    at = [datetime.fromisoformat(e["at"]) for e in entries]
    assert at == sorted(at)

    # `memql audit` reads the same log, newest first
    status, out = await memql("audit", "--project", name)
    assert status == 0
    lines = out.strip().splitlines()
    assert [line.split("  ")[0] for line in lines] == [e["id"] for e in reversed(entries)]
    assert lines[0].split("  ")[2:5] == [f"{user} (cli)", "project.memory_disabled", name]
    assert lines[-1].split("  ")[2:5] == ["alice (admin-api)", "project.created", name]
    status, out = await memql("audit", "--project", name, "--limit", "1")
    assert status == 0 and len(out.strip().splitlines()) == 1

    # pages of the query, newest first
    first = (await ok(http, AUDIT_LOG, {"project": name, "first": 2}))["auditLog"]
    rest = (await ok(http, AUDIT_LOG, {"project": name, "before": first[-1]["id"]}))["auditLog"]
    assert [e["id"] for e in first + rest] == [e["id"] for e in reversed(entries)]


@pytest.mark.parametrize(
    "variables",
    [{"first": 0}, {"first": 1001}, {"before": "x"}, {"before": "9" * 20}, {"project": "a\u0000"}],
    ids=["first 0", "first over", "before not an id", "before too large", "nul"],
)
async def test_a_bad_audit_query_is_bad_user_input(http, variables):
    refusal = await error(http, AUDIT_LOG, variables)
    assert refusal["extensions"]["code"] == "BAD_USER_INPUT", refusal


# ---- the HTTP edge ----------------------------------------------------------------------------


BAD_PROJECT_NAMES = ["", " padded", "x" * 101, "tab\there", "nul\u0000", "lone\ud800"]


@pytest.mark.parametrize("name", BAD_PROJECT_NAMES)
async def test_a_bad_project_name_is_bad_user_input_and_makes_nothing(http, db, name):
    refusal = await error(http, CREATE_PROJECT, {"name": name})
    assert refusal["extensions"]["code"] == "BAD_USER_INPUT", refusal
    if "\u0000" not in name and "\ud800" not in name:
        assert await count(db, "select count(*) from projects where name = %s", name) == 0


MALFORMED = {
    "not json": {"content": b"{nope", "headers": {"Content-Type": "application/json"}},
    "an array": {"json": [{"query": "{ operator { name } }"}]},
    "a string": {"json": "{ operator { name } }"},
    "nested": {"content": b"[" * 100_000, "headers": {"Content-Type": "application/json"}},
    "huge number": {"content": b'{"query": "{ operator { name } }", "variables": {"a": '
                    + b"9" * 5000 + b"}}", "headers": {"Content-Type": "application/json"}},
    "query not a string": {"json": {"query": 5}},
    "variables not an object": {"json": {"query": "{ operator { name } }", "variables": 5}},
    "operationName not a string": {"json": {"query": "{ operator { name } }", "operationName": 5}},
    "no query": {"json": {}},
    "syntax": {"json": {"query": "{ operator { "}},
    "unknown field": {"json": {"query": "{ memories { id } }"}},
    "wrong argument type": {"json": {"query": "{ auditLog(first: \"many\") { id } }"}},
    "missing variable": {"json": {"query": CREATE_PROJECT}},
    "form": {"content": b"query=x",
             "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
    "a subscription": {"json": {"query": "subscription { operator { name } }"}},
}  # fmt: skip


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_malformed_request_is_refused_with_a_code_never_a_500(http, case):
    request = dict(MALFORMED[case])
    headers = {**request.pop("headers", {}), **bearer(ALICE)}
    response = await http.post(PATH, headers=headers, **request)
    assert 200 <= response.status_code < 500, response.text
    body = response.json()
    codes = [e["extensions"]["code"] for e in body.get("errors") or []]
    assert codes and set(codes) <= {"BAD_USER_INPUT", "BAD_REQUEST", "UNSUPPORTED_MEDIA_TYPE"}, (
        response.status_code,
        body,
    )


async def test_a_deep_or_wide_query_is_refused_before_it_runs(http):
    deep = "{ __schema { types { " + "fields { type { " * 6 + "name" + " } }" * 6 + " } } }"
    response = await post(http, deep)
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    aliases = "{ " + " ".join(f"p{i}: projects {{ id }}" for i in range(40)) + " }"
    response = await post(http, aliases)
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    long = "{ operator { name } }" + "#" * (70 * 1024)
    response = await post(http, long)
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_only_post_is_served_and_there_is_no_graphiql(http):
    page = await http.get(PATH, headers={**bearer(ALICE), "Accept": "text/html"})
    assert page.status_code == 405 and "<html" not in page.text.lower()
    assert page.json()["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED"
    query = await http.get(PATH, params={"query": "{ operator { name } }"}, headers=bearer(ALICE))
    assert query.status_code == 405


async def test_the_admin_path_has_the_apis_headers_and_body_bound(http, admin_server):
    answer = await post(http, "{ operator { name } }")
    for header in ("x-content-type-options", "x-frame-options", "content-security-policy"):
        assert answer.headers[header], header
    assert answer.headers["content-security-policy"].startswith("default-src 'none'")
    big = await http.post(
        PATH, content=b" " * (4 * 1024 * 1024 + 1),
        headers={**bearer(ALICE), "Content-Type": "application/json"},
    )  # fmt: skip
    assert big.status_code == 413
    assert big.json()["errors"][0]["extensions"]["code"] == "PAYLOAD_TOO_LARGE"


async def test_pages_of_other_origins_get_no_cors_on_the_admin_path(http):
    preflight = {
        "Origin": CORS_ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    api = await http.options("/graphql", headers=preflight)
    assert api.headers.get("access-control-allow-origin") == CORS_ORIGIN  # listed: allowed there
    admin = await http.options(PATH, headers=preflight)
    assert admin.status_code in (404, 405)
    assert "access-control-allow-origin" not in admin.headers
    simple = await http.post(PATH, headers={"Origin": CORS_ORIGIN, **bearer(ALICE)},
                             json={"query": "{ operator { name } }"})  # fmt: skip
    assert "access-control-allow-origin" not in simple.headers


async def test_the_admin_api_and_the_memory_api_see_the_same_projects(http, database_url):
    tenant = await make_tenant(database_url)
    names = [p["name"] for p in (await ok(http, PROJECTS))["projects"]]
    assert tenant.project_name in names and names == sorted(names)
    user = GraphQLClient(http, tenant.key, "alice")
    await user.ok(SAVE, {"input": {"content": "Alice keeps one memory.", "kind": "TOPICAL"}})
    assert len((await user.ok(LIST))["memories"]["edges"]) == 1


async def test_while_the_database_is_away_the_admin_api_answers_a_prompt_503(
    database_url, embedder
):
    proxy = Proxy(database_url)
    url = await proxy.start()
    settings = admin_settings(url, pool_min_size=1, pool_max_size=2, pool_timeout_seconds=1.0)
    try:
        async with (
            serving(settings, embedder) as server,
            httpx.AsyncClient(base_url=server, timeout=60) as http,
        ):
            assert isinstance((await ok(http, PROJECTS))["projects"], list)
            await proxy.stop()
            for query, variables in ((PROJECTS, None), (CREATE_PROJECT, {"name": fresh_name()})):
                started = time.monotonic()
                response = await post(http, query, variables)
                assert response.status_code == 503, response.text
                codes = [e["extensions"]["code"] for e in response.json()["errors"]]
                assert codes == ["SERVICE_UNAVAILABLE"]
                assert time.monotonic() - started < 9
    finally:
        await proxy.stop()
