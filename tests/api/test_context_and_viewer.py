"""memoryContext, viewer and expiry through the real GraphQL API."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from tests.operations import CONTEXT, LIST, RECALL, SAVE, contents


async def test_memory_context_puts_pinned_first_then_newest_within_the_budget(alice):
    await alice.ok(
        SAVE,
        {
            "input": {
                "content": "Always answer in English.",
                "kind": "OPERATIONAL",
                "pinned": True,
                "category": "rules",
            }
        },
    )
    for text in ("Works at Globex.", "Has two cats.", "Runs marathons."):
        await alice.ok(SAVE, {"input": {"content": text, "kind": "TOPICAL"}})

    block = (await alice.ok(CONTEXT))["memoryContext"]
    assert block["text"].splitlines() == [
        "## Memories",
        "- [pinned · rules · operational] Always answer in English.",
        "- [general · topical] Runs marathons.",
        "- [general · topical] Has two cats.",
        "- [general · topical] Works at Globex.",
    ]
    assert (block["count"], block["omitted"]) == (4, 0)

    small = (await alice.ok(CONTEXT, {"budget": 120}))["memoryContext"]
    assert len(small["text"]) <= 120
    assert small["count"] + small["omitted"] == 4 and small["omitted"] > 0
    assert "omitted" in small["text"].splitlines()[-1]


async def test_viewer_reports_user_project_consumer_and_grant(alice, tenant):
    data = await alice.ok(
        "{ viewer { userId projectId projectName consumer grant { user project } } }"
    )
    assert data["viewer"] == {
        "userId": "alice",
        "projectId": str(tenant.project_id),
        "projectName": tenant.project_name,
        "consumer": "AGENT",
        "grant": {"user": "READ_WRITE", "project": "READ_WRITE"},
    }


async def test_an_expired_memory_behaves_as_retired(alice):
    # far enough ahead that a slow machine still lists it before it expires
    expires = datetime.now(UTC) + timedelta(seconds=6)
    soon = expires.isoformat()
    await alice.ok(
        SAVE,
        {
            "input": {
                "content": "On call this week.",
                "kind": "EPISODIC",
                "expiresAt": soon,
                "key": "on-call",
            }
        },
    )
    assert contents(await alice.ok(LIST)) == ["On call this week."]
    await asyncio.sleep((expires - datetime.now(UTC)).total_seconds() + 0.5)

    assert contents(await alice.ok(LIST)) == []
    assert (await alice.ok(RECALL, {"query": "on call"}))["recall"] == []
    expired = (await alice.ok(LIST, {"includeInvalidated": True}))["memories"]["edges"][0]["node"]
    assert expired["invalidationReason"] == "expired"
    assert expired["invalidatedAt"] is not None
    # the key is free again: a new save creates rather than supersedes
    again = await alice.ok(
        SAVE, {"input": {"content": "On call next week.", "kind": "EPISODIC", "key": "on-call"}}
    )
    assert again["saveMemory"]["outcome"] == "CREATED"
