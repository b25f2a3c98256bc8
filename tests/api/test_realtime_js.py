"""A subscriber written with the `graphql-ws` npm client (not ours) receives memoryEvents over
graphql-transport-ws. The `js_clients` fixture installs it (`npm ci` in tests/js)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from memql.testing import newest_cursor
from tests.operations import SAVE

JS = Path(__file__).parents[1] / "js"


async def test_the_graphql_ws_npm_client_receives_memory_events(
    server, alice, tenant, db, node, js_clients
):
    since = await newest_cursor(db, tenant.project_id)
    proc = await asyncio.create_subprocess_exec(
        node,
        str(JS / "subscribe.mjs"),
        server.replace("http://", "ws://") + "/graphql",
        tenant.key,
        "alice",
        str(since),
        "3",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert await asyncio.wait_for(proc.stdout.readline(), 20) == b"connected\n"
        saved = []
        for text in ("Joined the Berlin office on 2026-09-01.", "Moved desks on 2026-09-02."):
            result = await alice.ok(SAVE, {"input": {"content": text, "kind": "EPISODIC"}})
            saved.append(result["saveMemory"]["memory"]["id"])
        await alice.ok("mutation($id: ID!) { retireMemory(id: $id) { id } }", {"id": saved[0]})
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    events = [json.loads(line) for line in out.decode().splitlines()]
    assert [(e["type"], e["memoryId"]) for e in events] == [
        ("memory.created", saved[0]),
        ("memory.created", saved[1]),
        ("memory.retired", saved[0]),
    ]
    assert [int(e["cursor"]) for e in events] == sorted(int(e["cursor"]) for e in events)
