"""A batch of saves answers exactly as the same saves one after the other: outcomes and the
near-duplicates each reports, including those among the batch itself. A batch in which nothing
is absorbed and no key is named is written in one go; one that absorbs falls back to saving
input after input."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from memql.service.saving import Saving
from memql.testing import GraphQLClient, make_tenant

# near-duplicates are a matter of meaning
pytestmark = pytest.mark.model

SAVE_ONE = """
mutation($input: SaveMemoryInput!) { saveMemory(input: $input) {
  outcome memory { content } nearDuplicates { similarity memory { content } } } }
"""
SAVE_BATCH = """
mutation($inputs: [SaveMemoryInput!]!) { saveMemories(inputs: $inputs) {
  outcome memory { content } nearDuplicates { similarity memory { content } } } }
"""
STORED = {"content": "Prefers concise status updates (note 1).", "kind": "TOPICAL"}
# near-duplicates of each other and of the stored memory that are not absorbed (their numbers
# differ), a contradiction, and unrelated memories; in both scopes
DISTINCT = [
    {"content": "Prefers concise status updates (note 2).", "kind": "TOPICAL"},
    {"content": "Prefers concise status updates (note 3).", "kind": "TOPICAL"},
    {"content": "Likes coffee in the morning.", "kind": "TOPICAL"},
    {"content": "Does not like coffee in the morning.", "kind": "TOPICAL"},
    {"content": "Deploys run on Tuesdays (runbook 7).", "kind": "OPERATIONAL", "scope": "PROJECT"},
    {"content": "Deploys run on Tuesdays (runbook 8).", "kind": "OPERATIONAL", "scope": "PROJECT"},
    {"content": "The billing service is owned by Dana.", "kind": "TOPICAL"},
]


def summary(payload: dict[str, Any]) -> tuple[Any, ...]:
    return (
        payload["outcome"],
        payload["memory"]["content"],
        [(d["memory"]["content"], round(d["similarity"], 4)) for d in payload["nearDuplicates"]],
    )


async def one_by_one(client: GraphQLClient, inputs: list[dict[str, Any]]) -> list[Any]:
    return [summary((await client.ok(SAVE_ONE, {"input": i}))["saveMemory"]) for i in inputs]


async def as_batch(client: GraphQLClient, inputs: list[dict[str, Any]]) -> list[Any]:
    return [summary(p) for p in (await client.ok(SAVE_BATCH, {"inputs": inputs}))["saveMemories"]]


async def test_a_batch_without_absorption_is_written_at_once_and_answers_as_one_by_one(
    alice: GraphQLClient, http: httpx.AsyncClient, database_url: str,
    monkeypatch: pytest.MonkeyPatch,
):  # fmt: skip
    await alice.ok(SAVE_ONE, {"input": STORED})
    expected = await one_by_one(alice, DISTINCT)
    assert [e[0] for e in expected] == ["CREATED"] * len(DISTINCT)
    assert sum(bool(e[2]) for e in expected) >= 3, "the set should report near-duplicates"

    # the same memories in another project, as one batch
    other = await make_tenant(database_url)
    batcher = GraphQLClient(http, other.key, "alice")
    await batcher.ok(SAVE_ONE, {"input": STORED})

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("saved input after input")

    monkeypatch.setattr(Saving, "save_locked", refuse)
    assert await as_batch(batcher, DISTINCT) == expected


async def test_a_batch_that_absorbs_answers_as_one_by_one(alice: GraphQLClient, bob: GraphQLClient):
    inputs = [
        {"content": "Works from the Lisbon office.", "kind": "TOPICAL"},
        {"content": "Works from the Lisbon office.", "kind": "TOPICAL"},
        {"content": "Prefers concise status updates (note 2).", "kind": "TOPICAL"},
    ]
    await alice.ok(SAVE_ONE, {"input": STORED})
    await bob.ok(SAVE_ONE, {"input": STORED})
    expected = await one_by_one(alice, inputs)
    assert [e[0] for e in expected] == ["CREATED", "ABSORBED", "CREATED"]
    assert await as_batch(bob, inputs) == expected
