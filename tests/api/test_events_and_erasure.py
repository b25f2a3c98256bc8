"""Every write leaves its event in the same transaction; erasure leaves no content behind."""

from __future__ import annotations

from tests.operations import ERASE, ERASE_USER, LIST, RESTORE, RETIRE, SAVE, contents


async def events(db, project_id) -> list[tuple[str, str | None]]:
    cur = await db.execute(
        "select type, memory_id::text from memory_events where project_id = %s order by cursor",
        (project_id,),
    )
    return [(t, m) for t, m in await cur.fetchall()]


async def test_each_write_emits_its_event_with_a_rising_cursor(alice, tenant, db):
    a = (
        await alice.ok(
            SAVE, {"input": {"content": "Likes hiking.", "kind": "TOPICAL", "key": "hobby"}}
        )
    )["saveMemory"]["memory"]["id"]
    await alice.ok(SAVE, {"input": {"content": "likes hiking", "kind": "TOPICAL"}})
    b = (
        await alice.ok(
            SAVE, {"input": {"content": "Likes climbing.", "kind": "TOPICAL", "key": "hobby"}}
        )
    )["saveMemory"]["memory"]["id"]
    await alice.ok(RETIRE, {"id": b})
    await alice.ok(RESTORE, {"id": b})

    assert await events(db, tenant.project_id) == [
        ("memory.created", a),
        ("memory.absorbed", a),
        ("memory.superseded", b),
        ("memory.retired", b),
        ("memory.restored", b),
    ]
    cur = await db.execute(
        "select payload->>'absorbedContent' from memory_events"
        " where project_id = %s and type = 'memory.absorbed'",
        (tenant.project_id,),
    )
    # the absorbed wording is kept, so nothing said is lost
    assert await cur.fetchone() == ("likes hiking",)


async def test_erase_deletes_every_version_and_its_event_payloads(alice, bob, tenant, db):
    v1 = await alice.ok(
        SAVE,
        {"input": {"content": "Home address is 12 Elm St.", "kind": "TOPICAL", "key": "address"}},
    )
    await alice.ok(
        SAVE,
        {"input": {"content": "Home address is 9 Oak Ave.", "kind": "TOPICAL", "key": "address"}},
    )
    await alice.ok(SAVE, {"input": {"content": "Likes tea.", "kind": "TOPICAL"}})
    first_id = v1["saveMemory"]["memory"]["id"]

    result = await alice.ok(ERASE, {"id": first_id})
    assert result["eraseMemory"]["erased"] == 2

    assert contents(await alice.ok(LIST, {"includeInvalidated": True})) == ["Likes tea."]
    cur = await db.execute(
        "select count(*) from memory_events where project_id = %s"
        " and (payload::text like '%%Elm%%' or payload::text like '%%Oak%%')",
        (tenant.project_id,),
    )
    assert await cur.fetchone() == (0,)
    assert (await events(db, tenant.project_id))[-1] == ("memory.erased", first_id)


async def test_erase_user_memories_removes_only_that_user_in_that_project(alice, bob, tenant, db):
    for text in ("Alice fact one.", "Alice fact two."):
        await alice.ok(SAVE, {"input": {"content": text, "kind": "TOPICAL"}})
    await alice.ok(
        SAVE, {"input": {"content": "Shared fact.", "kind": "TOPICAL", "scope": "PROJECT"}}
    )
    await bob.ok(SAVE, {"input": {"content": "Bob fact.", "kind": "TOPICAL"}})

    assert (await alice.ok(ERASE_USER))["eraseUserMemories"]["erased"] == 2

    assert contents(await alice.ok(LIST)) == ["Shared fact."]
    assert sorted(contents(await bob.ok(LIST))) == ["Bob fact.", "Shared fact."]
    cur = await db.execute(
        "select count(*) from memory_events where project_id = %s and owner_id = 'alice'"
        " and type <> 'memory.erased'",
        (tenant.project_id,),
    )
    assert await cur.fetchone() == (0,)
