"""The core lifecycle through the real GraphQL API: save, absorb, supersede, retire, restore."""

from __future__ import annotations

from typing import Any

from memql.testing import GraphQLClient
from tests.operations import (
    GET,
    HISTORY,
    LIST,
    RECALL,
    RESTORE,
    RETIRE,
    SAVE,
    SAVE_MANY,
    SUPERSEDE,
    contents,
)


async def save(client: GraphQLClient, content: str, kind: str = "TOPICAL", **fields: Any) -> dict:
    data = await client.ok(SAVE, {"input": {"content": content, "kind": kind, **fields}})
    result: dict = data["saveMemory"]
    return result


async def test_identical_text_under_another_kind_is_a_second_memory(alice):
    first = await save(alice, "Review the release checklist.", "TOPICAL")
    second = await save(alice, "Review the release checklist.", "OPERATIONAL")

    assert second["outcome"] == "CREATED"
    assert second["memory"]["id"] != first["memory"]["id"]
    # reported, so the caller can decide to supersede instead
    assert [d["memory"]["id"] for d in second["nearDuplicates"]] == [first["memory"]["id"]]
    assert second["nearDuplicates"][0]["similarity"] > 0.99


async def test_saving_with_a_live_key_supersedes_and_history_shows_both_versions(alice):
    v1 = await save(alice, "Prefers email for status updates.", key="contact-channel")
    v2 = await save(alice, "Prefers Slack for status updates.", key="contact-channel")

    assert v2["outcome"] == "SUPERSEDED"
    assert v2["memory"]["id"] != v1["memory"]["id"]
    assert v2["memory"]["supersedes"] == v1["memory"]["id"]
    assert v2["superseded"] == {
        "id": v1["memory"]["id"],
        "invalidationReason": "superseded",
        "supersededBy": v2["memory"]["id"],
    }
    for some_version in (v1, v2):
        history = (await alice.ok(HISTORY, {"id": some_version["memory"]["id"]}))["memoryHistory"]
        assert [m["content"] for m in history] == [
            "Prefers email for status updates.",
            "Prefers Slack for status updates.",
        ]
    assert contents(await alice.ok(LIST)) == ["Prefers Slack for status updates."]


async def test_supersede_by_id_and_by_key_replaces_in_full(alice):
    v1 = await save(alice, "Timezone is CET.", key="tz", category="profile", pinned=True)
    by_key = await alice.ok(
        SUPERSEDE, {"key": "tz", "input": {"content": "Timezone is PST.", "kind": "TOPICAL"}}
    )
    v2 = by_key["supersedeMemory"]
    assert v2["superseded"]["id"] == v1["memory"]["id"]
    # a full replacement: fields not given take their defaults, the key is kept
    assert (v2["memory"]["key"], v2["memory"]["category"], v2["memory"]["pinned"]) == (
        "tz",
        "general",
        False,
    )
    by_id = await alice.ok(
        SUPERSEDE,
        {"id": v2["memory"]["id"], "input": {"content": "Timezone is JST.", "kind": "TOPICAL"}},
    )
    v3 = by_id["supersedeMemory"]["memory"]
    history = (await alice.ok(HISTORY, {"id": v1["memory"]["id"]}))["memoryHistory"]
    assert [m["id"] for m in history] == [v1["memory"]["id"], v2["memory"]["id"], v3["id"]]
    assert [m["invalidationReason"] for m in history] == ["superseded", "superseded", None]


async def test_a_superseded_version_cannot_be_superseded_again(alice):
    v1 = await save(alice, "Uses vim.", key="editor")
    await save(alice, "Uses emacs.", key="editor")
    code = await alice.error(
        SUPERSEDE, {"id": v1["memory"]["id"], "input": {"content": "Uses nano.", "kind": "TOPICAL"}}
    )
    assert code == "CONFLICT"
    assert contents(await alice.ok(LIST)) == ["Uses emacs."]


async def test_retired_memory_leaves_recall_and_list_and_returns_with_include_invalidated(alice):
    kept = await save(alice, "Prefers concise status updates.")
    gone = await save(alice, "Likes long detailed weekly reports about status.")
    retired = (await alice.ok(RETIRE, {"id": gone["memory"]["id"]}))["retireMemory"]
    assert retired["invalidationReason"] == "retired"
    assert retired["invalidatedAt"] is not None

    hits = (await alice.ok(RECALL, {"query": "weekly status reports", "limit": 20}))["recall"]
    assert [h["memory"]["id"] for h in hits] == [kept["memory"]["id"]]
    assert contents(await alice.ok(LIST)) == ["Prefers concise status updates."]
    listed = contents(await alice.ok(LIST, {"includeInvalidated": True}))
    assert sorted(listed) == sorted(
        ["Prefers concise status updates.", "Likes long detailed weekly reports about status."]
    )


async def test_restore_brings_a_retired_memory_back(alice):
    saved = await save(alice, "Allergic to peanuts.")
    await alice.ok(RETIRE, {"id": saved["memory"]["id"]})
    restored = (await alice.ok(RESTORE, {"id": saved["memory"]["id"]}))["restoreMemory"]
    assert restored["invalidatedAt"] is None
    assert contents(await alice.ok(LIST)) == ["Allergic to peanuts."]
    hits = (await alice.ok(RECALL, {"query": "food allergies"}))["recall"]
    assert hits[0]["memory"]["id"] == saved["memory"]["id"]


async def test_restore_refuses_a_superseded_version(alice):
    v1 = await save(alice, "Lives in Berlin.", key="city")
    await save(alice, "Lives in Munich.", key="city")
    assert await alice.error(RESTORE, {"id": v1["memory"]["id"]}) == "CONFLICT"


async def test_retire_by_key_and_the_key_is_free_again(alice):
    await save(alice, "Standup is at 9:30.", key="standup-time")
    await alice.ok(RETIRE, {"key": "standup-time"})
    again = await save(alice, "Standup is at 10:00.", key="standup-time")
    assert again["outcome"] == "CREATED"


async def test_batch_save_reports_each_outcome_in_order(alice):
    data = await alice.ok(
        SAVE_MANY,
        {
            "inputs": [
                {"content": "Drinks oat milk.", "kind": "TOPICAL"},
                {"content": "Drinks oat milk.", "kind": "TOPICAL"},
                {"content": "Flew to Lisbon on 2026-03-02.", "kind": "EPISODIC"},
            ]
        },
    )
    outcomes = [r["outcome"] for r in data["saveMemories"]]
    assert outcomes == ["CREATED", "ABSORBED", "CREATED"]
    assert data["saveMemories"][0]["memory"]["id"] == data["saveMemories"][1]["memory"]["id"]


async def test_list_filters_and_pages_newest_first(alice):
    for i in range(5):
        await save(alice, f"Project note number {i} about the zephyr rollout.", category="notes")
    await save(alice, "Pinned rule: always cite sources.", "OPERATIONAL", pinned=True)

    page1 = await alice.ok(LIST, {"first": 2, "categories": ["notes"]})
    assert contents(page1) == [
        "Project note number 4 about the zephyr rollout.",
        "Project note number 3 about the zephyr rollout.",
    ]
    assert page1["memories"]["pageInfo"]["hasNextPage"] is True
    seen = contents(page1)
    after = page1["memories"]["pageInfo"]["endCursor"]
    while after:
        page = await alice.ok(LIST, {"first": 2, "categories": ["notes"], "after": after})
        seen += contents(page)
        info = page["memories"]["pageInfo"]
        after = info["endCursor"] if info["hasNextPage"] else None
    assert seen == [f"Project note number {i} about the zephyr rollout." for i in range(4, -1, -1)]

    assert contents(await alice.ok(LIST, {"pinned": True})) == ["Pinned rule: always cite sources."]
    assert contents(await alice.ok(LIST, {"kinds": ["OPERATIONAL"]})) == [
        "Pinned rule: always cite sources."
    ]
    assert len(contents(await alice.ok(LIST, {"contains": "ZEPHYR"}))) == 5


FORMER = """query Former($kind: MemoryKind, $category: String) {
  memories(kind: $kind, category: $category) { edges { node { content } } }
}"""


async def test_the_former_names_kind_and_category_still_filter_a_list_for_one_release(alice):
    await save(alice, "Always cite sources.", "OPERATIONAL", category="rules")
    await save(alice, "Ran the Berlin half marathon.", "EPISODIC", category="sport")
    await save(alice, "Prefers tea.", "TOPICAL", category="sport")

    assert contents(await alice.ok(FORMER, {"kind": "OPERATIONAL"})) == ["Always cite sources."]
    assert contents(await alice.ok(FORMER, {"kind": "EPISODIC", "category": "sport"})) == [
        "Ran the Berlin half marathon."
    ]
    # one name or the other: both at once is refused, naming the former one
    body = await alice.raw("{ memories(kind: TOPICAL, kinds: [EPISODIC]) { edges { cursor } } }")
    assert body["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT", "argument": "kind"}
    assert body["data"] is None


RECALL_FILTERED = """query($q: String!, $pinned: Boolean, $contains: String,
    $categories: [String!]) {
  recall(query: $q, pinned: $pinned, contains: $contains, categories: $categories) {
    memory { content }
  }
}"""
CONTEXT_FILTERED = """query($kinds: [MemoryKind!]) {
  memoryContext(kinds: $kinds) { text count omitted }
}"""


async def test_recall_and_the_context_block_take_the_filter_of_lists(alice):
    await save(alice, "Tea rule: steep green tea for two minutes.", "OPERATIONAL", pinned=True)
    await save(alice, "Tea fact: prefers black tea with milk.", "TOPICAL", category="drinks")
    await save(alice, "Tea event: bought a tea pot in Kyoto.", "EPISODIC", category="drinks")

    def recalled(data: dict) -> set[str]:
        return {h["memory"]["content"] for h in data["recall"]}

    pinned = await alice.ok(RECALL_FILTERED, {"q": "tea", "pinned": True})
    assert recalled(pinned) == {"Tea rule: steep green tea for two minutes."}
    drinks = await alice.ok(RECALL_FILTERED, {"q": "tea", "categories": ["drinks"]})
    assert recalled(drinks) == {
        "Tea fact: prefers black tea with milk.",
        "Tea event: bought a tea pot in Kyoto.",
    }
    kyoto = await alice.ok(RECALL_FILTERED, {"q": "tea", "contains": "KYOTO"})
    assert recalled(kyoto) == {"Tea event: bought a tea pot in Kyoto."}

    block = (await alice.ok(CONTEXT_FILTERED, {"kinds": ["TOPICAL"]}))["memoryContext"]
    assert block["count"] == 1 and block["omitted"] == 0
    assert "prefers black tea" in block["text"] and "Kyoto" not in block["text"]


async def test_recall_refuses_to_include_invalidated_versions(alice):
    # recall reads live memories only: the list's flag is not one of its arguments
    body = await alice.raw('{ recall(query: "tea", includeInvalidated: true) { score } }')
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_project_scope_is_shared_between_users_and_user_scope_is_not(alice, bob):
    await save(alice, "The team ships on Fridays.", scope="PROJECT")
    await save(alice, "Alice prefers tea.")

    assert contents(await bob.ok(LIST)) == ["The team ships on Fridays."]
    assert contents(await bob.ok(LIST, {"scope": "USER"})) == []
    assert contents(await alice.ok(LIST, {"scope": "PROJECT"})) == ["The team ships on Fridays."]


async def test_recall_filters_by_kind_and_category(alice):
    await save(alice, "Deploy with the blue-green script.", "OPERATIONAL", category="ops")
    await save(alice, "Deployed version 2.3 on Monday.", "EPISODIC", category="ops")
    await save(alice, "Prefers deploys in the morning.", "TOPICAL", category="prefs")

    hits = (await alice.ok(RECALL, {"query": "deploy", "kinds": ["EPISODIC"]}))["recall"]
    assert [h["memory"]["content"] for h in hits] == ["Deployed version 2.3 on Monday."]
    hits = (await alice.ok(RECALL, {"query": "deploy", "categories": ["prefs"]}))["recall"]
    assert [h["memory"]["content"] for h in hits] == ["Prefers deploys in the morning."]


async def test_get_returns_the_memory_and_null_for_an_unknown_id(alice):
    saved = await save(alice, "Speaks Portuguese.")
    got = (await alice.ok(GET, {"id": saved["memory"]["id"]}))["memory"]
    assert got == saved["memory"]
    assert (await alice.ok(GET, {"id": "00000000-0000-4000-8000-000000000000"}))["memory"] is None
