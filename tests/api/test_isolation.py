"""One user's memories never reach another user or another project."""

from __future__ import annotations

from memql.testing import GraphQLClient, make_tenant
from tests.operations import (
    CONTEXT,
    ERASE,
    GET,
    HISTORY,
    LIST,
    RECALL,
    RESTORE,
    RETIRE,
    SAVE,
    SUPERSEDE,
    contents,
)

SECRET = "Alice's locker code is 4417."


async def alice_secret(alice: GraphQLClient) -> str:
    data = await alice.ok(SAVE, {"input": {"content": SECRET, "kind": "TOPICAL", "key": "locker"}})
    memory_id: str = data["saveMemory"]["memory"]["id"]
    return memory_id


async def test_another_user_sees_nothing_of_a_user_memory(alice, bob):
    memory_id = await alice_secret(alice)
    await bob.ok(SAVE, {"input": {"content": "Bob likes jazz.", "kind": "TOPICAL"}})

    assert contents(await bob.ok(LIST, {"includeInvalidated": True})) == ["Bob likes jazz."]
    assert (await bob.ok(GET, {"id": memory_id}))["memory"] is None
    hits = (await bob.ok(RECALL, {"query": "locker code", "limit": 20}))["recall"]
    assert [h["memory"]["content"] for h in hits] == ["Bob likes jazz."]
    assert await bob.error(HISTORY, {"id": memory_id}) == "NOT_FOUND"
    context = (await bob.ok(CONTEXT, {"query": "locker code"}))["memoryContext"]
    assert "4417" not in context["text"] and context["count"] == 1
    context = (await bob.ok(CONTEXT))["memoryContext"]
    assert "4417" not in context["text"] and context["count"] == 1


async def test_another_user_cannot_change_a_user_memory(alice, bob):
    memory_id = await alice_secret(alice)
    new = {"content": "Hijacked.", "kind": "TOPICAL"}

    assert await bob.error(RETIRE, {"id": memory_id}) == "NOT_FOUND"
    assert await bob.error(SUPERSEDE, {"id": memory_id, "input": new}) == "NOT_FOUND"
    assert await bob.error(ERASE, {"id": memory_id}) == "NOT_FOUND"
    await alice.ok(RETIRE, {"id": memory_id})
    assert await bob.error(RESTORE, {"id": memory_id}) == "NOT_FOUND"
    # bob's key lookups stay in bob's space: the same key is free for him
    saved = await bob.ok(SAVE, {"input": {**new, "key": "locker"}})
    assert saved["saveMemory"]["outcome"] == "CREATED"

    history = (await alice.ok(HISTORY, {"id": memory_id}))["memoryHistory"]
    assert [(m["content"], m["invalidationReason"]) for m in history] == [(SECRET, "retired")]


async def test_another_project_sees_nothing_even_for_the_same_user_id(alice, http, database_url):
    memory_id = await alice_secret(alice)
    other = await make_tenant(database_url)
    alice_elsewhere = GraphQLClient(http, other.key, "alice")

    assert contents(await alice_elsewhere.ok(LIST, {"includeInvalidated": True})) == []
    assert (await alice_elsewhere.ok(GET, {"id": memory_id}))["memory"] is None
    assert (await alice_elsewhere.ok(RECALL, {"query": "locker code"}))["recall"] == []
    assert await alice_elsewhere.error(RETIRE, {"id": memory_id}) == "NOT_FOUND"
    assert (await alice_elsewhere.ok(CONTEXT))["memoryContext"]["count"] == 0
