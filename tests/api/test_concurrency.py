"""Concurrent writes for one user, sent at once over real HTTP, leave exactly one live row."""

from __future__ import annotations

import asyncio

from tests.operations import LIST, SAVE, contents


async def test_twenty_concurrent_saves_of_one_content_leave_one_memory(alice, tenant, db):
    saves = [
        alice.ok(
            SAVE,
            {
                "input": {
                    "content": "Prefers concise status updates.",
                    "kind": "TOPICAL",
                    "sourceThreadIds": [f"thread-{i}"],
                }
            },
        )
        for i in range(20)
    ]
    results = [r["saveMemory"] for r in await asyncio.gather(*saves)]

    outcomes = sorted(r["outcome"] for r in results)
    assert outcomes == ["ABSORBED"] * 19 + ["CREATED"]
    assert len({r["memory"]["id"] for r in results}) == 1
    assert contents(await alice.ok(LIST, {"includeInvalidated": True})) == [
        "Prefers concise status updates."
    ]
    # no provenance was lost on the way
    final = (await alice.ok(LIST))["memories"]["edges"][0]["node"]
    assert sorted(final["sourceThreadIds"]) == sorted(f"thread-{i}" for i in range(20))
    cur = await db.execute(
        "select type, count(*) from memory_events where project_id = %s group by type order by 1",
        (tenant.project_id,),
    )
    assert await cur.fetchall() == [("memory.absorbed", 19), ("memory.created", 1)]


async def test_twenty_concurrent_saves_with_one_key_leave_one_live_version(alice):
    saves = [
        alice.ok(
            SAVE,
            {
                "input": {
                    "content": f"Favourite number is {i}.",
                    "kind": "TOPICAL",
                    "key": "favourite-number",
                }
            },
        )
        for i in range(20)
    ]
    results = [r["saveMemory"] for r in await asyncio.gather(*saves)]

    assert sorted(r["outcome"] for r in results) == ["CREATED"] + ["SUPERSEDED"] * 19
    live = contents(await alice.ok(LIST))
    assert len(live) == 1
    every = (await alice.ok(LIST, {"includeInvalidated": True, "first": 50}))["memories"]["edges"]
    assert len(every) == 20
    # the versions form one chain: each superseded one points at exactly one successor
    nodes = [e["node"] for e in every]
    assert sum(n["invalidatedAt"] is None for n in nodes) == 1
    successors = [n["supersededBy"] for n in nodes if n["supersededBy"]]
    assert len(successors) == len(set(successors)) == 19


async def test_concurrent_saves_of_different_users_do_not_absorb_each_other(alice, bob):
    text = "Prefers dark mode."
    saves = [c.ok(SAVE, {"input": {"content": text, "kind": "TOPICAL"}}) for c in (alice, bob) * 5]
    results = [r["saveMemory"] for r in await asyncio.gather(*saves)]
    assert sorted(r["outcome"] for r in results) == ["ABSORBED"] * 8 + ["CREATED"] * 2
    assert contents(await alice.ok(LIST)) == [text]
    assert contents(await bob.ok(LIST)) == [text]
