"""`memql import` holds every record to the rules the API applies to what it stores: a file
with one bad record (NUL, a lone surrogate, a non-finite or overlong number, an oversize or
malformed field) ends with exit status 2 and a message naming the line and the field, and the
import is atomic: nothing of the file is written, not even the good records before the bad one.
Every rule is checked through `transfer.import_` on the tests' database; the real CLI runs the
kinds of refusal (text, numbers, size, JSON depth) and a clean file."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from memql import transfer
from memql.db.pool import system_connection
from memql.errors import BadInput
from memql.settings import Limits
from tests.conftest import make_tenant


def record(content: str, **fields: Any) -> dict[str, Any]:
    """A record as `memql export` writes it."""
    return {
        "id": str(uuid.uuid4()),
        "scope": "user",
        "owner_id": "alice",
        "kind": "topical",
        "content": content,
        "key": None,
        "category": "general",
        "pinned": False,
        "source_thread_ids": ["t1"],
        "source": {"tool": "chat"},
        "created_by": "alice",
        "created_at": "2026-01-02T03:04:05+00:00",
        "updated_at": "2026-01-02T03:04:05+00:00",
        "expires_at": None,
        "invalidated_at": None,
        "invalidation_reason": None,
        "supersedes": None,
        "superseded_by": None,
        "embedding_model": "all-MiniLM-L6-v2",
        "occurred_at": None,
        **fields,
    }


def line(rec: dict[str, Any]) -> str:
    # allow_nan: the file may hold what Python's json reads (NaN, Infinity), as a hostile or
    # hand-edited file would
    return json.dumps(rec, ensure_ascii=True, allow_nan=True)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# (the bad second line, the field its error must name)
BAD_LINES = {
    "nul-in-content": (line(record("Uses\x00Vim.")), "content"),
    "lone-surrogate-in-category": (line(record("Uses Vim.", category="\ud800x")), "category"),
    "nul-in-a-thread-id": (
        line(record("Uses Vim.", source_thread_ids=["a\x00"])),
        "source_thread_ids",
    ),
    "nul-in-a-source-key": (line(record("Uses Vim.", source={"k\x00": 1})), "source"),
    "nan-in-source": (line(record("Uses Vim.", source={"score": float("nan")})), "source"),
    "overflowing-float-in-source": (
        line(record("Uses Vim.")).replace('"tool": "chat"', '"score": 1e400'),
        "source",
    ),
    "integer-beyond-64-bits-in-source": (line(record("Uses Vim.", source={"n": 2**70})), "source"),
    "source-nested-past-the-limit": (
        line(record("Uses Vim.")).replace('{"tool": "chat"}', '{"a": ' + nested(40) + "}"),
        "source",
    ),
    "oversize-content": (line(record("x" * 8193)), "content"),
    "empty-content": (line(record("   ")), "content"),
    "too-many-thread-ids": (
        line(record("Uses Vim.", source_thread_ids=[str(i) for i in range(101)])),
        "source_thread_ids",
    ),
    "key-not-a-slug": (line(record("Uses Vim.", key="no spaces allowed")), "key"),
    "category-over-a-line": (line(record("Uses Vim.", category="a\rb")), "category"),
    "source-not-an-object": (line(record("Uses Vim.", source=[1, 2])), "source"),
    "owner-with-a-control-character": (line(record("Uses Vim.", owner_id="al\x07ice")), "owner_id"),
    "project-memory-with-an-owner": (line(record("Uses Vim.", scope="project")), "owner_id"),
    "unknown-invalidation-reason": (
        line(
            record(
                "Uses Vim.",
                invalidated_at="2026-01-03T00:00:00+00:00",
                invalidation_reason="deleted",
            )
        ),
        "invalidation_reason",
    ),
}


async def run_import(database_url: str, project: str, path: Path) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memql.cli",
        "import",
        "--project",
        project,
        str(path),
        env={**os.environ, "DATABASE_URL": database_url},
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stderr.decode()


async def stored(db, project_id: uuid.UUID) -> int:
    cur = await db.execute("select count(*) from memories where project_id = %s", (project_id,))
    (count,) = await cur.fetchone()
    return int(count)


def file_with(bad: str) -> list[str]:
    """Three lines, the second bad."""
    return [line(record("Prefers tea.")), bad, line(record("Lives in Oslo."))]


@pytest.mark.parametrize(("bad", "field"), BAD_LINES.values(), ids=BAD_LINES.keys())
async def test_an_import_with_one_bad_record_names_its_line_and_field_and_writes_nothing(
    database_url, db, embedder, bad, field
):
    tenant = await make_tenant(database_url)
    async with await system_connection(database_url) as conn:
        with pytest.raises(BadInput) as refused:
            await transfer.import_(conn, tenant.project_id, file_with(bad), embedder, Limits())
    assert refused.value.message.startswith("line 2: ")
    assert f"`{field}`" in refused.value.message
    assert refused.value.extensions == {"line": 2, "field": field}
    assert await stored(db, tenant.project_id) == 0


CLI_CASES = ["nul-in-content", "lone-surrogate-in-category", "nan-in-source", "oversize-content"]


@pytest.mark.parametrize("case", CLI_CASES)
async def test_the_import_command_refuses_a_bad_record_by_line_and_field_and_writes_nothing(
    database_url, db, tmp_path, case
):
    bad, field = BAD_LINES[case]
    tenant = await make_tenant(database_url)
    path = tmp_path / "memories.jsonl"
    path.write_text("\n".join(file_with(bad)) + "\n", encoding="utf-8")

    status, stderr = await run_import(database_url, tenant.project_name, path)

    assert status == 2, stderr
    message = stderr.strip().splitlines()[-1]
    assert message.startswith("memql: line 2: "), stderr
    assert f"`{field}`" in message, stderr
    assert "Traceback" not in stderr
    assert await stored(db, tenant.project_id) == 0


async def test_a_record_too_deep_for_the_json_reader_is_refused_by_line(database_url, db, tmp_path):
    tenant = await make_tenant(database_url)
    path = tmp_path / "memories.jsonl"
    deep = line(record("Uses Vim.")).replace('{"tool": "chat"}', nested(100_000))
    path.write_text(line(record("Prefers tea.")) + "\n" + deep + "\n", encoding="utf-8")

    status, stderr = await run_import(database_url, tenant.project_name, path)

    assert status == 2, stderr
    assert stderr.strip().splitlines()[-1].startswith("memql: line 2: not a memql export record")
    assert "Traceback" not in stderr
    assert await stored(db, tenant.project_id) == 0


async def test_a_clean_file_still_imports_whole(database_url, db, tmp_path):
    tenant = await make_tenant(database_url)
    path = tmp_path / "memories.jsonl"
    records = [record("Prefers tea.", source={"score": 0.5, "n": 2**62}), record("Lives in Oslo.")]
    path.write_text("".join(line(r) + "\n" for r in records), encoding="utf-8")

    status, stderr = await run_import(database_url, tenant.project_name, path)

    assert status == 0, stderr
    assert "imported 2 memory versions" in stderr
    assert await stored(db, tenant.project_id) == 2
