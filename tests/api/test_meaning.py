"""What rests on the real model's sense of meaning, through the API: a paraphrased question
recalls the memory first, a context block puts the most relevant first, `minScore` drops weak
hits, a repeated save is absorbed, a near-duplicate of another kind and a contradiction below
the bar are reported (GraphQL, MCP, the Python client). The rest of the API is tested with the
deterministic embedder."""

from __future__ import annotations

import pytest

from memql import AsyncClient, MemoryInput
from memql.model import Access, Consumer, Kind, SaveOutcome
from memql.settings import Settings
from memql.testing import GraphQLClient
from tests.api.test_conventions import RECALL_MIN, save_facts
from tests.api.test_mcp import call, credentials, mcp_session
from tests.api.test_memories import save
from tests.operations import CONTEXT, LIST, RECALL, SAVE, contents

pytestmark = pytest.mark.model


async def test_saved_preference_is_recalled_first_by_a_paraphrased_question(alice):
    await save(alice, "Works at Globex on the billing team.")
    target = await save(alice, "Prefers concise status updates.")
    await save(alice, "Has a dog named Biscuit.", "EPISODIC")
    await save(alice, "Deploys go out on Tuesdays after the standup.", "OPERATIONAL")

    hits = (await alice.ok(RECALL, {"query": "how does this user like updates"}))["recall"]

    assert hits[0]["memory"]["id"] == target["memory"]["id"]
    assert all(0.0 <= h["score"] <= 1.0 for h in hits)
    assert hits[0]["score"] > hits[1]["score"]
    assert hits[0]["signals"]["vector"] > 0.4


async def test_saving_the_same_text_again_is_absorbed_into_the_same_memory(alice):
    first = await save(alice, "Prefers concise status updates.", sourceThreadIds=["t1"])
    second = await save(alice, "Prefers concise status updates.", sourceThreadIds=["t2"])

    assert first["outcome"] == "CREATED"
    assert second["outcome"] == "ABSORBED"
    assert second["memory"]["id"] == first["memory"]["id"]
    assert second["memory"]["sourceThreadIds"] == ["t1", "t2"]
    assert second["memory"]["updatedAt"] > first["memory"]["updatedAt"]
    assert len(contents(await alice.ok(LIST))) == 1


async def test_memory_context_with_a_query_puts_the_most_relevant_first(alice):
    for text in ("Works at Globex.", "Allergic to shellfish.", "Has two cats."):
        await alice.ok(SAVE, {"input": {"content": text, "kind": "TOPICAL"}})
    block = (await alice.ok(CONTEXT, {"query": "what can't they eat"}))["memoryContext"]
    assert block["text"].splitlines()[1] == "- [general · topical] Allergic to shellfish."
    assert block["count"] == 3


async def test_recall_min_score_drops_weak_hits_so_gibberish_finds_nothing(alice):
    await save_facts(alice)
    weak = (await alice.ok(RECALL_MIN, {"q": "zxqv blorptang wug"}))["recall"]
    assert weak and max(h["score"] for h in weak) < 0.3
    assert (await alice.ok(RECALL_MIN, {"q": "zxqv blorptang wug", "min": 0.3}))["recall"] == []
    strong = (await alice.ok(RECALL_MIN, {"q": "does she keep bees", "min": 0.3}))["recall"]
    assert [h["memory"]["content"] for h in strong] == ["Keeps bees in the garden."]
    assert all(h["score"] >= 0.3 for h in strong)
    for bad in (-0.1, 1.5):
        assert await alice.error(RECALL_MIN, {"q": "bees", "min": bad}) == "BAD_USER_INPUT"


async def test_agents_recall_with_a_minimum_score_over_mcp(server, tenant):
    from tests.api.test_mcp import refused

    async with mcp_session(server, credentials(tenant)) as session:
        await call(session, "save_memory", content="Keeps bees in the garden.", kind="topical")
        none = await call(session, "recall_memory", query="zxqv blorptang wug", min_score=0.3)
        assert none["memories"] == []
        hits = await call(session, "recall_memory", query="bees", min_score=0.3)
        assert [m["content"] for m in hits["memories"]] == ["Keeps bees in the garden."]
        assert await refused(session, "recall_memory", query="bees", min_score=2) == (
            "BAD_USER_INPUT"
        )


async def test_save_reports_created_absorbed_and_superseded(server, tenant):
    async with mcp_session(server, credentials(tenant)) as session:
        first = await call(session, "save_memory", content="Prefers tea.", kind="topical")
        assert first["outcome"] == "created"

        again = await call(session, "save_memory", content="Prefers tea.", kind="topical")
        assert again["outcome"] == "absorbed"
        assert again["memory"]["id"] == first["memory"]["id"]

        v1 = await call(
            session, "save_memory", content="Lives in Lyon.", kind="topical", key="home-city"
        )
        v2 = await call(
            session, "save_memory", content="Lives in Porto.", kind="topical", key="home-city"
        )
        assert v2["outcome"] == "superseded"
        assert v2["superseded_id"] == v1["memory"]["id"]
        assert v2["memory"]["id"] != v1["memory"]["id"]


async def test_save_lists_near_duplicates_of_another_kind_so_the_agent_can_supersede(
    server, tenant
):
    async with mcp_session(server, credentials(tenant)) as session:
        fact = await call(session, "save_memory", content="Answers in English.", kind="operational")
        other = await call(session, "save_memory", content="Answers in English.", kind="topical")
    assert other["outcome"] == "created"
    assert [d["id"] for d in other["near_duplicates"]] == [fact["memory"]["id"]]
    assert other["near_duplicates"][0]["kind"] == "operational"
    assert "supersede_memory" in other["note"]


async def test_recall_list_supersede_and_forget(server, tenant):
    async with mcp_session(server, credentials(tenant)) as session:
        await call(session, "save_memory", content="Allergic to shellfish.", kind="topical")
        cats = await call(
            session, "save_memory", content="Has two cats.", kind="topical", key="pets"
        )
        await call(
            session,
            "save_memory",
            content="Always cite sources.",
            kind="operational",
            pinned=True,
            category="rules",
        )

        recalled = await call(session, "recall_memory", query="what can't they eat", limit=1)
        assert [m["content"] for m in recalled["memories"]] == ["Allergic to shellfish."]
        assert 0 < recalled["memories"][0]["score"] <= 1

        listed = await call(session, "list_memories", kinds=["operational"])
        assert [m["content"] for m in listed["memories"]] == ["Always cite sources."]
        page = await call(session, "list_memories", first=2)
        assert len(page["memories"]) == 2 and page["next_cursor"]
        rest = await call(session, "list_memories", first=2, after=page["next_cursor"])
        assert len(rest["memories"]) == 1 and rest["next_cursor"] is None

        replaced = await call(
            session,
            "supersede_memory",
            id=cats["memory"]["id"],
            content="Has three cats.",
            kind="topical",
        )
        assert replaced["outcome"] == "superseded"
        assert replaced["superseded_id"] == cats["memory"]["id"]
        assert replaced["memory"]["key"] == "pets"  # the new version keeps the key

        forgotten = await call(session, "forget_memory", key="pets")
        assert forgotten["forgotten"]["id"] == replaced["memory"]["id"]
        assert forgotten["forgotten"]["invalidation_reason"] == "retired"

        live = await call(session, "list_memories")
        assert sorted(m["content"] for m in live["memories"]) == [
            "Allergic to shellfish.",
            "Always cite sources.",
        ]
        everything = await call(session, "list_memories", include_forgotten=True)
        assert len(everything["memories"]) == 4


async def test_the_async_client_saves_absorbs_supersedes_and_reads_back(server, tenant):
    async with AsyncClient(server, api_key=tenant.key, user_id="alice") as m:
        viewer = await m.viewer()
        assert (viewer.user_id, viewer.consumer) == ("alice", Consumer.AGENT)
        assert viewer.grant.user is Access.READ_WRITE

        created = await m.save("Prefers concise status updates.", "topical", category="style")
        assert created.outcome is SaveOutcome.CREATED
        assert created.memory.kind is Kind.TOPICAL and created.memory.category == "style"
        again = await m.save("Prefers concise status updates.", Kind.TOPICAL)
        assert again.outcome is SaveOutcome.ABSORBED
        assert again.memory.id == created.memory.id

        first = await m.save("Prefers email.", "topical", key="channel")
        second = await m.save("Prefers Slack.", "topical", key="channel")
        assert second.outcome is SaveOutcome.SUPERSEDED
        assert second.superseded is not None and second.superseded.id == first.memory.id
        history = await m.history(second.memory.id)
        assert [v.content for v in history] == ["Prefers email.", "Prefers Slack."]

        third = await m.supersede(MemoryInput("Prefers Signal.", "topical"), key="channel")
        assert third.superseded.id == second.memory.id
        assert third.memory.supersedes == second.memory.id

        fetched = await m.memory(created.memory.id)
        assert fetched == created.memory.__class__(
            **{**created.memory.__dict__, "updated_at": fetched.updated_at}
        )
        hits = await m.recall("how does this user like status reports", limit=3)
        assert hits[0].memory.id == created.memory.id
        assert 0 < hits[0].score <= 1 and hits[0].signals.vector > 0.5

        block = await m.context()
        assert "Prefers concise status updates." in block.text and block.count == 2


async def test_a_contradiction_below_the_near_duplicate_bar_is_still_reported(
    alice: GraphQLClient,
):
    first = await alice.ok(SAVE, {"input": {"content": "Likes tea.", "kind": "TOPICAL"}})
    second = await alice.ok(SAVE, {"input": {"content": "No longer likes tea.", "kind": "TOPICAL"}})
    payload = second["saveMemory"]
    assert payload["outcome"] == "CREATED"
    near = payload["nearDuplicates"]
    assert [n["memory"]["id"] for n in near] == [first["saveMemory"]["memory"]["id"]]
    # below the 0.80 bar: reported because the polarity is opposite
    assert near[0]["similarity"] < Settings().near_duplicate_threshold
