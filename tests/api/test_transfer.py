"""`memql export` and `memql import` round-trip a project's memories, every version kept."""

from __future__ import annotations

import base64
import io
import json
import uuid

import numpy as np
import pytest

from memql import transfer
from memql.db.pool import system_connection
from memql.testing import GraphQLClient, make_tenant
from tests.operations import HISTORY, LIST, RECALL, RETIRE, SAVE, contents

# an import embeds anew and recall must find the same memories: that takes the model
pytestmark = pytest.mark.model


async def test_export_then_import_into_an_empty_project_keeps_ids_versions_and_recall(
    alice, bob, tenant, database_url, embedder, http
):
    v1 = await alice.ok(
        SAVE,
        {
            "input": {
                "content": "Prefers email.",
                "kind": "TOPICAL",
                "key": "channel",
                "sourceThreadIds": ["t1"],
            }
        },
    )
    v2 = await alice.ok(
        SAVE, {"input": {"content": "Prefers Slack.", "kind": "TOPICAL", "key": "channel"}}
    )
    gone = await alice.ok(SAVE, {"input": {"content": "Lives in Oslo.", "kind": "TOPICAL"}})
    await alice.ok(RETIRE, {"id": gone["saveMemory"]["memory"]["id"]})
    await bob.ok(
        SAVE,
        {
            "input": {
                "content": "Team standup at 9.",
                "kind": "OPERATIONAL",
                "scope": "PROJECT",
                "pinned": True,
            }
        },
    )

    out = io.StringIO()
    async with await system_connection(database_url) as conn:
        assert await transfer.export(conn, tenant.project_id, out) == 4

    target = await make_tenant(database_url)
    lines = out.getvalue().splitlines()
    async with await system_connection(database_url) as conn:
        # ids are kept, so the export goes into another project of another database in practice;
        # here the same database proves an id collision is skipped, not duplicated
        assert await transfer.import_(conn, tenant.project_id, lines, embedder) == (0, 4, 4)

    async with await system_connection(database_url) as conn:
        await conn.execute("delete from memory_events where project_id = %s", (tenant.project_id,))
        await conn.execute("delete from memories where project_id = %s", (tenant.project_id,))
        await conn.commit()
        assert await transfer.import_(conn, target.project_id, lines, embedder) == (4, 0, 4)

    moved = GraphQLClient(http, target.key, "alice")
    assert contents(await moved.ok(LIST)) == ["Team standup at 9.", "Prefers Slack."]
    history = (await moved.ok(HISTORY, {"id": v2["saveMemory"]["memory"]["id"]}))["memoryHistory"]
    assert [m["id"] for m in history] == [
        v1["saveMemory"]["memory"]["id"],
        v2["saveMemory"]["memory"]["id"],
    ]
    assert history[0]["sourceThreadIds"] == ["t1"]
    retired = await moved.ok(LIST, {"includeInvalidated": True, "contains": "Oslo"})
    assert retired["memories"]["edges"][0]["node"]["invalidationReason"] == "retired"
    hits = (await moved.ok(RECALL, {"query": "which chat tool do they like"}))["recall"]
    assert hits[0]["memory"]["content"] == "Prefers Slack."


async def test_the_export_command_writes_one_json_line_per_version(
    alice, tenant, database_url, tmp_path
):
    import asyncio
    import json
    import os
    import sys

    await alice.ok(SAVE, {"input": {"content": "Uses Vim.", "kind": "TOPICAL", "key": "editor"}})
    await alice.ok(SAVE, {"input": {"content": "Uses Helix.", "kind": "TOPICAL", "key": "editor"}})
    target = tmp_path / "memories.jsonl"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memql.cli",
        "export",
        "--project",
        tenant.project_name,
        "-o",
        str(target),
        env={**os.environ, "DATABASE_URL": database_url},
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert [(r["content"], r["invalidation_reason"]) for r in records] == [
        ("Uses Vim.", "superseded"),
        ("Uses Helix.", None),
    ]
    assert "exported 2 memory versions" in stderr.decode()


async def test_an_export_with_vectors_imports_without_the_model_and_recalls_the_same(
    alice, tenant, database_url, embedder, http, db
):
    for content in ("Prefers Slack.", "Lives in Oslo.", "Allergic to peanuts."):
        await alice.ok(SAVE, {"input": {"content": content, "kind": "TOPICAL"}})
    out = io.StringIO()
    async with await system_connection(database_url) as conn:
        assert await transfer.export(conn, tenant.project_id, out, vectors=True) == 3
    lines = out.getvalue().splitlines()
    # each line carries its vector: little-endian float32, base64
    assert all(
        len(base64.b64decode(json.loads(line)["embedding"])) == 4 * embedder.dimensions
        for line in lines
    )

    # ids are kept: in this database the same memories go in again under new ones
    lines = [json.dumps({**json.loads(line), "id": str(uuid.uuid4())}) for line in lines]
    target = await make_tenant(database_url)
    async with await system_connection(database_url) as conn:
        assert await transfer.import_(conn, target.project_id, lines, embedder) == (3, 0, 0)

    async def vectors(project_id):
        cur = await db.execute(
            "select content, embedding::real[] from memories where project_id = %s"
            " order by content",
            (project_id,),
        )
        return [(content, np.asarray(vector)) for content, vector in await cur.fetchall()]

    before, after = await vectors(tenant.project_id), await vectors(target.project_id)
    assert [c for c, _ in before] == [c for c, _ in after]
    for (_, a), (_, b) in zip(before, after, strict=True):
        assert np.allclose(a, b, atol=1e-6)
    moved = GraphQLClient(http, target.key, "alice")
    hits = (await moved.ok(RECALL, {"query": "which chat tool do they like"}))["recall"]
    assert hits[0]["memory"]["content"] == "Prefers Slack."
