"""Each owner's count of memories that are not retired or superseded is kept by the writes
themselves (009_owner_counts.sql): after every kind of write it equals a count of the rows, and
the context block's count and a list's totalCount (which read it) equal the live memories. A
database that held memories before the counters existed gets them counted when it migrates."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from memql.db import migrate as migrations
from memql.testing import GraphQLClient, Tenant
from tests.operations import (
    CONTEXT,
    ERASE,
    ERASE_USER,
    RESTORE,
    RETIRE,
    SAVE,
    SAVE_MANY,
    SUPERSEDE,
)  # fmt: skip

TOTAL = "query { memories(first: 1) { totalCount } }"


async def counters(db: psycopg.AsyncConnection[Any], project_id: uuid.UUID) -> dict[Any, int]:
    cur = await db.execute(
        "select scope, owner_id, live from memory_counts where project_id = %s and live <> 0",
        (project_id,),
    )
    return {(scope, owner): live for scope, owner, live in await cur.fetchall()}


async def truth(db: psycopg.AsyncConnection[Any], project_id: uuid.UUID) -> dict[Any, int]:
    cur = await db.execute(
        "select scope, owner_id, count(*) from memories where project_id = %s"
        " and invalidated_at is null group by 1, 2",
        (project_id,),
    )
    return {(scope, owner): n for scope, owner, n in await cur.fetchall()}


async def live(db: psycopg.AsyncConnection[Any], project_id: uuid.UUID, user: str) -> int:
    cur = await db.execute(
        "select count(*) from memories where project_id = %s and (owner_id = %s or scope ="
        " 'project') and invalidated_at is null and (expires_at is null or expires_at > now())",
        (project_id, user),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_counters_follow_every_kind_of_write(
    alice: GraphQLClient, bob: GraphQLClient, tenant: Tenant, db: psycopg.AsyncConnection[Any]
):
    async def check() -> None:
        assert await counters(db, tenant.project_id) == await truth(db, tenant.project_id)
        for client in (alice, bob):
            assert client.user is not None
            expected = await live(db, tenant.project_id, client.user)
            assert (await client.ok(CONTEXT))["memoryContext"]["count"] == expected
            assert (await client.ok(TOTAL))["memories"]["totalCount"] == expected

    def save(content: str, **extra: Any) -> dict[str, Any]:
        return {"input": {"content": content, "kind": "TOPICAL", **extra}}

    await alice.ok(
        SAVE_MANY,
        {"inputs": [{"content": f"Alice's fact number {i}.", "kind": "TOPICAL"} for i in range(5)]
         + [{"content": f"Shared runbook {i}.", "kind": "OPERATIONAL", "scope": "PROJECT"}
            for i in range(3)]},
    )  # fmt: skip
    await bob.ok(SAVE, save("Bob likes tea."))
    await check()
    # absorbed: no new row
    first = (await alice.ok(SAVE, save("Prefers concise status updates.")))["saveMemory"]
    again = (await alice.ok(SAVE, save("Prefers concise status updates.")))["saveMemory"]
    assert again["outcome"] == "ABSORBED"
    await check()
    # superseded by key, and by id
    await alice.ok(SAVE, save("Works from Lisbon.", key="city"))
    await alice.ok(SAVE, save("Works from Porto.", key="city"))
    await alice.ok(SUPERSEDE, {"id": first["memory"]["id"], **save("Prefers short updates.")})
    await check()
    # retired, restored, retired again
    retired = (await alice.ok(RETIRE, {"key": "city"}))["retireMemory"]
    await check()
    await alice.ok(RESTORE, {"id": retired["id"]})
    await check()
    await alice.ok(RETIRE, {"key": "city"})
    # erased: one chain, then everything of bob
    await alice.ok(ERASE, {"id": retired["id"]})
    await check()
    await bob.ok(ERASE_USER)
    await check()
    # expired without being invalidated: still counted, subtracted when read
    await db.execute(
        "update memories set expires_at = now() - interval '1 second'"
        " where project_id = %s and owner_id = 'alice' and content = 'Alice''s fact number 0.'",
        (tenant.project_id,),
    )
    await check()


async def test_a_deleted_project_takes_its_counters(
    alice: GraphQLClient, tenant: Tenant, db: psycopg.AsyncConnection[Any]
):
    await alice.ok(SAVE, {"input": {"content": "Soon gone.", "kind": "TOPICAL"}})
    assert await counters(db, tenant.project_id) == {("user", "alice"): 1}
    await db.execute("delete from projects where id = %s", (tenant.project_id,))
    assert await counters(db, tenant.project_id) == {}


async def test_an_existing_database_gets_its_counters_when_it_migrates(
    database_url: str, monkeypatch: pytest.MonkeyPatch
):
    name = f"memql_counts_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as admin:
        await admin.execute(f"create database {name}")
    url = conninfo.make_conninfo(database_url, dbname=name)
    every = migrations._migrations()
    before = [m for m in every if m[0] < "009"]
    monkeypatch.setattr(migrations, "_migrations", lambda: before)
    await migrations.migrate(url)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        project = uuid.uuid4()
        await conn.execute("insert into projects (id, name) values (%s, 'old')", (project,))
        await conn.execute(
            """
            insert into memories (id, project_id, scope, owner_id, kind, content, created_by,
                embedding_model, embedding, invalidated_at, invalidation_reason)
            select gen_random_uuid(), %s, s.scope, s.owner, 'topical', 'm' || g, 'x', 'model',
                '[1,0]', case when g %% 4 = 0 then now() end,
                case when g %% 4 = 0 then 'retired' end
            from generate_series(1, 40) g,
                (values ('user', 'ann'), ('user', 'ben'), ('project', '')) s(scope, owner)
            """,
            (project,),
        )
        monkeypatch.setattr(migrations, "_migrations", lambda: every)
        assert "009_owner_counts" in await migrations.migrate(url)
        assert await counters(conn, project) == await truth(conn, project)
        assert await counters(conn, project) == {
            ("user", "ann"): 30, ("user", "ben"): 30, ("project", ""): 30
        }  # fmt: skip
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as admin:
        await admin.execute(f"drop database {name}")
