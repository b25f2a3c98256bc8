"""`occurredAt`: when an episodic memory's event happened, beside when memql learned it. Saved,
filtered by range in lists and recall, exported and imported, shown in the context block, and
offered to agents over MCP and to the Python client."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import UTC, datetime

from memql import AsyncClient, transfer
from memql.db.pool import system_connection
from memql.model import Kind
from memql.rules.context_block import format_line
from memql.testing import make_tenant
from tests.factories import memory
from tests.operations import CONTEXT, LIST, RECALL, SAVE, contents

EVENTS = [
    ("Ran the Berlin half marathon.", "2026-03-02"),
    ("Moved to a new flat in Kreuzberg.", "2026-05-10T14:30:00+02:00"),
    ("Started a pottery class.", "2026-07-01T00:00:00Z"),
]

LIST_OCCURRED = """
query($after: DateTime, $before: DateTime) {
  memories(occurredAfter: $after, occurredBefore: $before) { edges { node { content occurredAt } } }
}
"""

RECALL_OCCURRED = """
query($q: String!, $after: DateTime, $before: DateTime) {
  recall(query: $q, occurredAfter: $after, occurredBefore: $before, limit: 10) {
    memory { content occurredAt }
  }
}
"""


async def save_events(client) -> list[dict]:
    saved = []
    for content, when in EVENTS:
        data = await client.ok(
            SAVE, {"input": {"content": content, "kind": "EPISODIC", "occurredAt": when}}
        )
        saved.append(data["saveMemory"]["memory"])
    await client.ok(SAVE, {"input": {"content": "Prefers tea to coffee.", "kind": "TOPICAL"}})
    return saved


async def test_occurred_at_is_saved_read_back_and_a_zoneless_time_is_utc(alice):
    saved = await save_events(alice)
    assert [datetime.fromisoformat(m["occurredAt"]) for m in saved] == [
        datetime(2026, 3, 2, tzinfo=UTC),
        datetime(2026, 5, 10, 12, 30, tzinfo=UTC),
        datetime(2026, 7, 1, tzinfo=UTC),
    ]
    listed = await alice.ok(LIST)
    by_content = {
        e["node"]["content"]: e["node"]["occurredAt"] for e in listed["memories"]["edges"]
    }
    assert by_content["Prefers tea to coffee."] is None


async def test_lists_and_recall_filter_by_a_half_open_range_of_event_time(alice):
    await save_events(alice)
    spring = {"after": "2026-03-02T00:00:00Z", "before": "2026-07-01T00:00:00Z"}
    listed = await alice.ok(LIST_OCCURRED, spring)
    # the start is included, the end is not; a memory with no event time is outside any range
    assert sorted(e["node"]["content"] for e in listed["memories"]["edges"]) == [
        "Moved to a new flat in Kreuzberg.",
        "Ran the Berlin half marathon.",
    ]
    later = await alice.ok(LIST_OCCURRED, {"after": "2026-06-01"})
    assert [e["node"]["content"] for e in later["memories"]["edges"]] == [
        "Started a pottery class."
    ]
    hits = await alice.ok(RECALL_OCCURRED, {"q": "sport and running", **spring})
    assert {h["memory"]["content"] for h in hits["recall"]} == {
        "Moved to a new flat in Kreuzberg.",
        "Ran the Berlin half marathon.",
    }
    everything = await alice.ok(RECALL, {"query": "sport and running", "limit": 10})
    assert len(everything["recall"]) == 4


async def test_an_empty_or_reversed_range_is_bad_input(alice):
    for rng in (
        {"after": "2026-05-01", "before": "2026-05-01"},
        {"after": "2026-06-01", "before": "2026-05-01"},
    ):
        assert await alice.error(LIST_OCCURRED, rng) == "BAD_USER_INPUT"
        assert await alice.error(RECALL_OCCURRED, {"q": "x", **rng}) == "BAD_USER_INPUT"
    assert await alice.error(LIST_OCCURRED, {"after": "last tuesday"}) == "BAD_USER_INPUT"


async def test_the_same_words_at_two_event_times_are_two_memories(alice):
    save = {"content": "Went to the climbing gym.", "kind": "EPISODIC"}
    first = await alice.ok(SAVE, {"input": {**save, "occurredAt": "2026-04-01"}})
    other_day = await alice.ok(SAVE, {"input": {**save, "occurredAt": "2026-04-08"}})
    same_day = await alice.ok(SAVE, {"input": {**save, "occurredAt": "2026-04-08T00:00:00Z"}})
    assert first["saveMemory"]["outcome"] == "CREATED"
    assert other_day["saveMemory"]["outcome"] == "CREATED"
    assert same_day["saveMemory"]["outcome"] == "ABSORBED"
    assert same_day["saveMemory"]["memory"]["id"] == other_day["saveMemory"]["memory"]["id"]
    assert len(contents(await alice.ok(LIST))) == 2


async def test_the_context_block_shows_the_event_date(alice):
    await save_events(alice)
    block = (await alice.ok(CONTEXT))["memoryContext"]["text"]
    assert "- [general · episodic] (2026-03-02) Ran the Berlin half marathon." in block
    assert "(2026-05-10 12:30 UTC) Moved to a new flat in Kreuzberg." in block
    assert "- [general · topical] Prefers tea to coffee." in block


def test_a_context_line_carries_the_utc_date_and_a_time_only_when_not_midnight():
    undated = memory("Likes jazz.")
    assert format_line(undated) == "- [general · topical] Likes jazz."
    dated = replace(
        memory("Flew to Lisbon.", Kind.EPISODIC), occurred_at=datetime(2026, 3, 2, tzinfo=UTC)
    )
    assert format_line(dated) == "- [general · episodic] (2026-03-02) Flew to Lisbon."
    timed = replace(dated, occurred_at=datetime.fromisoformat("2026-03-02T23:15:00-01:00"))
    assert format_line(timed) == "- [general · episodic] (2026-03-03 00:15 UTC) Flew to Lisbon."


async def test_export_and_import_keep_the_event_time(alice, tenant, database_url, embedder):
    await save_events(alice)
    out = io.StringIO()
    async with await system_connection(database_url) as conn:
        await transfer.export(conn, tenant.project_id, out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(r["occurred_at"] or "" for r in records) == [
        "",
        "2026-03-02T00:00:00+00:00",
        "2026-05-10T12:30:00+00:00",
        "2026-07-01T00:00:00+00:00",
    ]
    target = await make_tenant(database_url)
    # a record exported before memories had an event time imports as undated
    older = {k: v for k, v in records[0].items() if k != "occurred_at"}
    older["id"] = "00000000-0000-4000-8000-000000000001"
    lines = [json.dumps(older)] + [json.dumps({**r, "id": r["id"][:-4] + "ffff"}) for r in records]
    async with await system_connection(database_url) as conn:
        assert await transfer.import_(conn, target.project_id, lines, embedder) == (5, 0, 5)
        cur = await conn.execute(
            "select occurred_at from memories where project_id = %s order by occurred_at",
            (target.project_id,),
        )
        times = [row[0] for row in await cur.fetchall()]
    assert times[:3] == [
        datetime(2026, 3, 2, tzinfo=UTC),
        datetime(2026, 5, 10, 12, 30, tzinfo=UTC),
        datetime(2026, 7, 1, tzinfo=UTC),
    ]
    assert times[3:] == [None, None]


async def test_the_python_client_saves_and_filters_by_event_time(server, tenant):
    async with AsyncClient(server, api_key=tenant.key, user_id="alice") as m:
        saved = await m.save(
            "Gave a talk at PyCon.", "episodic", occurred_at=datetime(2026, 4, 20, tzinfo=UTC)
        )
        assert saved.memory.occurred_at == datetime(2026, 4, 20, tzinfo=UTC)
        await m.save("Prefers aisle seats.", "topical")
        page = await m.memories(occurred_after=datetime(2026, 4, 1, tzinfo=UTC))
        assert [x.content for x in page.memories] == ["Gave a talk at PyCon."]
        hits = await m.recall("conference talk", occurred_before=datetime(2026, 4, 1, tzinfo=UTC))
        assert hits == []


async def test_agents_save_and_filter_event_time_over_mcp(server, tenant):
    from tests.api.test_mcp import call, credentials, mcp_session

    async with mcp_session(server, credentials(tenant)) as session:
        saved = await call(
            session,
            "save_memory",
            content="Had a dentist appointment.",
            kind="episodic",
            occurred_at="2026-02-11",
        )
        assert saved["memory"]["occurred_at"] == "2026-02-11T00:00:00+00:00"
        await call(session, "save_memory", content="Flossing daily.", kind="operational")
        listed = await call(session, "list_memories", occurred_before="2026-03-01")
        assert [m["content"] for m in listed["memories"]] == ["Had a dentist appointment."]
        recalled = await call(
            session, "recall_memory", query="dentist", occurred_after="2026-02-12"
        )
        assert recalled["memories"] == []


# times that parse, but fall outside years 1..9999 once in UTC
OUT_OF_RANGE = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-05:00"]
EVERY_DATE_ARGUMENT = [
    (
        'mutation($t: DateTime) { saveMemory(input: {content: "At a time.", kind: EPISODIC,'
        " occurredAt: $t}) { memory { id } } }"
    ),
    (
        'mutation($t: DateTime) { saveMemory(input: {content: "Until a time.", kind: TOPICAL,'
        " expiresAt: $t}) { memory { id } } }"
    ),
    *(
        f"query($t: DateTime) {{ memories({arg}: $t) {{ totalCount }} }}"
        for arg in (
            "occurredAfter",
            "occurredBefore",
            "createdAfter",
            "createdBefore",
            "updatedAfter",
            "updatedBefore",
        )
    ),
    *(
        f'query($t: DateTime) {{ recall(query: "time", {arg}: $t) {{ score }} }}'
        for arg in ("occurredAfter", "occurredBefore")
    ),
]


async def test_every_date_argument_out_of_range_in_utc_is_bad_input(alice, tenant, db):
    for query in EVERY_DATE_ARGUMENT:
        for value in OUT_OF_RANGE:
            body = await alice.raw(query, {"t": value})
            error = body["errors"][0]
            assert error["extensions"]["code"] == "BAD_USER_INPUT", (query, value, body)
            assert "out of range" in error["message"], error
    assert (await alice.ok(LIST_OCCURRED))["memories"]["edges"] == []


async def test_agents_get_the_same_refusal_for_an_out_of_range_date(server, tenant):
    from tests.api.test_mcp import credentials, mcp_session, refused

    async with mcp_session(server, credentials(tenant)) as session:
        for value in OUT_OF_RANGE:
            for tool, arguments in (
                (
                    "save_memory",
                    {"content": "At a time.", "kind": "episodic", "occurred_at": value},
                ),
                (
                    "save_memory",
                    {"content": "Until a time.", "kind": "topical", "expires_at": value},
                ),
                ("list_memories", {"occurred_after": value}),
                ("recall_memory", {"query": "time", "occurred_before": value}),
            ):
                assert await refused(session, tool, **arguments) == "BAD_USER_INPUT", (tool, value)
