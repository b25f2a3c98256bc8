"""The chat loop of docs/context.md runs against the real server and puts the memories in its
prompt."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.operations import SAVE

# the loop's prompt holds the memories relevant to the message: that takes the model
pytestmark = pytest.mark.model

CHAT_LOOP = Path(__file__).resolve().parents[2] / "examples" / "chat_loop.py"


async def chat_loop(server: str, tenant, user: str, message: str) -> str:
    """Run examples/chat_loop.py as a user would, for one message; return what it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHAT_LOOP),
        user,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MEMQL_URL": server, "MEMQL_KEY": tenant.key},
    )
    out, err = await asyncio.wait_for(process.communicate(f"{message}\n".encode()), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_the_chat_loop_puts_pinned_then_relevant_memories_in_its_system_prompt(
    server, tenant, alice
):
    await alice.ok(SAVE, {"input": {"content": "Has two cats.", "kind": "TOPICAL"}})
    await alice.ok(SAVE, {"input": {"content": "Allergic to shellfish.", "kind": "TOPICAL"}})
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
    out = await chat_loop(server, tenant, "alice", "what should I cook tonight?")

    prompt = out.split("[system prompt]\n", 1)[1].split("\n[end]", 1)[0]
    lines = prompt.splitlines()
    memories = lines[lines.index("## Memories") + 1 :]
    assert memories == [
        "- [pinned · rules · operational] Always answer in English.",
        "- [general · topical] Allergic to shellfish.",
        "- [general · topical] Has two cats.",
    ]


async def test_the_chat_loop_of_a_user_without_memories_sends_the_base_prompt(server, tenant):
    out = await chat_loop(server, tenant, "nobody", "hello")
    assert out == ("[system prompt]\nYou are a helpful assistant. Answer briefly.\n[end]\n")
