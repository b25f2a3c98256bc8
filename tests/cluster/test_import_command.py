"""The `memql import` command itself, as a process: one bad record of each kind (text,
numbers, size, JSON depth) ends with exit status 2 and a message naming the line and the field,
and writes nothing; a clean file imports whole; an export with vectors goes in without the
model. (Every rule of the import: tests/service/test_import_hygiene.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from memql.testing import make_tenant
from tests.service.test_import_hygiene import BAD_LINES, file_with, line, nested, record, stored

# the command embeds with the configured (real) model: it writes into the model's database
pytestmark = pytest.mark.model

CLI_CASES = ["nul-in-content", "lone-surrogate-in-category", "nan-in-source", "oversize-content"]


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


async def test_an_export_with_vectors_goes_into_another_project_without_embedding(
    database_url, db, tmp_path
):
    source, target = await make_tenant(database_url), await make_tenant(database_url)
    first = tmp_path / "first.jsonl"
    first.write_text(line(record("Prefers tea.")) + "\n" + line(record("Lives in Oslo.")) + "\n")
    status, stderr = await run_import(database_url, source.project_name, first)
    assert status == 0, stderr
    assert "2 records embedded" in stderr

    exported = tmp_path / "exported.jsonl"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "memql.cli", "export", "--project", source.project_name,
        "--vectors", "-o", str(exported),
        env={**os.environ, "DATABASE_URL": database_url}, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, export_err = await process.communicate()
    assert process.returncode == 0, export_err.decode()
    records = [json.loads(text) for text in exported.read_text().splitlines()]
    assert all(r["embedding"] for r in records)
    # the same memories under new ids, as if into another database
    again = tmp_path / "again.jsonl"
    again.write_text("".join(line({**r, "id": str(uuid.uuid4())}) + "\n" for r in records))

    status, stderr = await run_import(database_url, target.project_name, again)

    assert status == 0, stderr
    assert "imported 2 memory versions" in stderr
    assert "0 records embedded" in stderr
    assert await stored(db, target.project_id) == 2
