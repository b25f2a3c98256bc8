"""Bad input and bad credentials get a clear code and change nothing."""

from __future__ import annotations

import pytest

from memql.db.session import is_distributed
from tests.operations import LIST, RECALL, SAVE, SAVE_MANY, SUPERSEDE, contents


async def count_rows(db, project_id) -> tuple[int, int]:
    cur = await db.execute(
        "select (select count(*) from memories where project_id = %s),"
        " (select count(*) from memory_events where project_id = %s)",
        (project_id, project_id),
    )
    row = await cur.fetchone()
    return int(row[0]), int(row[1])


BAD_INPUTS = [
    pytest.param({"content": "   ", "kind": "TOPICAL"}, id="blank content"),
    pytest.param({"content": "x" * 8193, "kind": "TOPICAL"}, id="content over the limit"),
    pytest.param({"content": "ok", "kind": "GOSSIP"}, id="unknown kind"),
    pytest.param({"content": "ok"}, id="missing kind"),
    pytest.param({"content": "ok", "kind": "TOPICAL", "mood": "happy"}, id="unknown field"),
    pytest.param({"content": "ok", "kind": "TOPICAL", "key": "has spaces"}, id="bad key"),
    pytest.param({"content": "ok", "kind": "TOPICAL", "category": ""}, id="empty category"),
    pytest.param(
        {"content": "ok", "kind": "TOPICAL", "sourceThreadIds": [f"t{i}" for i in range(101)]},
        id="too many thread ids",
    ),
    pytest.param({"content": "ok", "kind": "TOPICAL", "source": [1, 2]}, id="source not object"),
    pytest.param(
        {"content": "ok", "kind": "TOPICAL", "expiresAt": "2001-01-01T00:00:00+00:00"},
        id="expiry in the past",
    ),
    pytest.param({"content": "ok", "kind": "TOPICAL", "expiresAt": "soon"}, id="bad date"),
]


@pytest.mark.parametrize("bad", BAD_INPUTS)
async def test_bad_save_input_is_rejected_and_writes_nothing(alice, tenant, db, bad):
    before = await count_rows(db, tenant.project_id)
    assert await alice.error(SAVE, {"input": bad}) == "BAD_USER_INPUT"
    assert await count_rows(db, tenant.project_id) == before


async def test_content_at_the_limit_after_trimming_is_accepted(alice):
    data = await alice.ok(SAVE, {"input": {"content": "  " + "y" * 8192 + "\n", "kind": "TOPICAL"}})
    assert len(data["saveMemory"]["memory"]["content"]) == 8192


async def test_one_bad_input_fails_the_whole_batch(alice, tenant, db):
    inputs = [
        {"content": "Good one.", "kind": "TOPICAL"},
        {"content": "", "kind": "TOPICAL"},
    ]
    body = await alice.raw(SAVE_MANY, {"inputs": inputs})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert body["errors"][0]["extensions"]["index"] == 1
    assert await count_rows(db, tenant.project_id) == (0, 0)


async def test_a_batch_over_the_limit_is_rejected(alice, tenant, db):
    inputs = [{"content": f"Fact {i}.", "kind": "TOPICAL"} for i in range(101)]
    assert await alice.error(SAVE_MANY, {"inputs": inputs}) == "BAD_USER_INPUT"
    assert await count_rows(db, tenant.project_id) == (0, 0)


@pytest.mark.parametrize(
    ("query", "variables"),
    [
        (LIST, {"first": 0}),
        (LIST, {"first": 201}),
        (LIST, {"after": "not-a-cursor"}),
        (RECALL, {"query": "x", "limit": 21}),
        (RECALL, {"query": "   "}),
        ('query { memory(id: "nope") { id } }', {}),
        ("query { memoryContext(budget: 0) { text } }", {}),
        ("query { memories { edges { node { nonsense } } } }", {}),
        ("query { memories(", {}),
    ],
)
async def test_bad_read_arguments_are_bad_user_input(alice, query, variables):
    assert await alice.error(query, variables) == "BAD_USER_INPUT"


async def test_supersede_needs_exactly_one_of_id_and_key(alice):
    new = {"content": "x", "kind": "TOPICAL"}
    assert await alice.error(SUPERSEDE, {"input": new}) == "BAD_USER_INPUT"
    assert (
        await alice.error(
            SUPERSEDE, {"id": "00000000-0000-4000-8000-000000000000", "key": "k", "input": new}
        )
        == "BAD_USER_INPUT"
    )


async def test_a_new_version_cannot_change_scope(alice):
    await alice.ok(SAVE, {"input": {"content": "Uses Linux.", "kind": "TOPICAL", "key": "os"}})
    new = {"content": "Uses macOS.", "kind": "TOPICAL", "scope": "PROJECT"}
    assert await alice.error(SUPERSEDE, {"key": "os", "input": new}) == "BAD_USER_INPUT"
    assert contents(await alice.ok(LIST)) == ["Uses Linux."]


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no credentials"),
        pytest.param({"X-User-Id": "alice"}, id="no key"),
        pytest.param({"Authorization": "Bearer mq_wrong", "X-User-Id": "alice"}, id="wrong key"),
        pytest.param({"Authorization": "Basic abc", "X-User-Id": "alice"}, id="not bearer"),
        pytest.param({"Authorization": "Bearer {key}"}, id="no user"),
        pytest.param({"Authorization": "Bearer {key}", "X-User-Id": ""}, id="blank user"),
    ],
)
async def test_missing_or_wrong_credentials_are_unauthenticated(http, tenant, db, headers):
    headers = {k: v.format(key=tenant.key) for k, v in headers.items()}
    response = await http.post(
        "/graphql",
        json={"query": SAVE, "variables": {"input": {"content": "x", "kind": "TOPICAL"}}},
        headers=headers,
    )
    body = response.json()
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert await count_rows(db, tenant.project_id) == (0, 0)


async def test_a_revoked_key_stops_working_on_the_next_request(alice, tenant, db):
    await alice.ok(LIST)
    await db.execute(
        "update api_keys set revoked_at = now() where project_id = %s", (tenant.project_id,)
    )
    assert await alice.error(LIST) == "UNAUTHENTICATED"


async def test_unexpected_errors_are_masked_with_an_error_id(alice, db, tenant, caplog):
    # break the table under the service for this project only: a trigger that raises
    if await is_distributed(db):
        # on Citus a trigger of a distributed table is created on every shard, on request
        await db.execute("set citus.enable_unsafe_triggers = on")
    await db.execute(
        """
        create or replace function memql_test_fail() returns trigger language plpgsql as $$
        begin
          if new.project_id = %s::uuid then raise exception 'disk on fire'; end if;
          return new;
        end $$;
        """.replace("%s", f"'{tenant.project_id}'")
    )
    await db.execute(
        "create trigger memql_test_fail before insert on memories"
        " for each row execute function memql_test_fail()"
    )
    try:
        body = await alice.raw(SAVE, {"input": {"content": "x", "kind": "TOPICAL"}})
    finally:
        await db.execute("drop trigger memql_test_fail on memories")
    error = body["errors"][0]
    assert error["extensions"]["code"] == "INTERNAL_SERVER_ERROR"
    assert "disk on fire" not in error["message"]
    assert error["extensions"]["errorId"] in error["message"]
    assert any(error["extensions"]["errorId"] in r.getMessage() for r in caplog.records)
    assert await count_rows(db, tenant.project_id) == (0, 0)
