"""`memql import` holds every record to the rules the API applies to what it stores: a file
with one bad record (NUL, a lone surrogate, a non-finite or overlong number, an oversize or
malformed field) ends with exit status 2 and a message naming the line and the field, and the
import is atomic: nothing of the file is written, not even the good records before the bad one.
Every rule is checked here through `transfer.import_` on the tests' database; the real command
runs the kinds of refusal and a clean file in tests/cluster/test_import_command.py."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import numpy as np
import pytest

from memql import transfer
from memql.db.pool import system_connection
from memql.errors import BadInput
from memql.settings import Limits
from memql.testing import make_tenant


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


def packed(values: list[float]) -> str:
    """A vector as `memql export --vectors` writes it."""
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")


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
    "embedding-not-base64": (line(record("Uses Vim.", embedding="not base64!")), "embedding"),
    "embedding-not-whole-floats": (
        line(record("Uses Vim.", embedding="AAAA")),  # three bytes
        "embedding",
    ),
    "embedding-not-a-string": (line(record("Uses Vim.", embedding=[0.5, 0.5])), "embedding"),
    "embedding-nan": (
        line(record("Uses Vim.", embedding=packed([1.0, float("nan")]))),
        "embedding",
    ),
    "embedding-all-zero": (line(record("Uses Vim.", embedding=packed([0.0] * 4))), "embedding"),
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


async def test_a_vector_of_the_importing_model_with_other_dimensions_is_refused_by_line(
    database_url, db, embedder
):
    tenant = await make_tenant(database_url)
    short = packed([1.0] * (embedder.dimensions - 1))
    bad = line(record("Uses Vim.", embedding_model=embedder.model, embedding=short))
    async with await system_connection(database_url) as conn:
        with pytest.raises(BadInput) as refused:
            await transfer.import_(conn, tenant.project_id, file_with(bad), embedder, Limits())
    assert refused.value.extensions == {"line": 2, "field": "embedding"}
    assert f"has {embedder.dimensions - 1} dimensions" in refused.value.message
    assert await stored(db, tenant.project_id) == 0


async def test_a_vector_of_another_model_is_left_and_the_content_embedded(
    database_url, db, embedder
):
    tenant = await make_tenant(database_url)
    other = record("Uses Vim.", embedding_model="another-model", embedding=packed([1.0] * 7))
    async with await system_connection(database_url) as conn:
        done = await transfer.import_(conn, tenant.project_id, [line(other)], embedder, Limits())
    assert done == (1, 0, 1)
    [expected] = await embedder.embed(["Uses Vim."])
    cur = await db.execute(
        "select embedding_model, embedding::real[] from memories where project_id = %s",
        (tenant.project_id,),
    )
    model, vector = await cur.fetchone()
    assert model == embedder.model
    assert np.allclose(np.asarray(vector), expected, atol=1e-6)


class CountingEmbedder:
    """The tests' embedder, counting the texts it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model, self.dimensions, self.texts = (
            inner,
            inner.model,
            inner.dimensions,
            0,
        )

    async def embed(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        return await self.inner.embed(texts)


async def test_an_export_imported_into_another_project_of_its_server_is_refused_before_embedding(
    database_url, db, embedder
):
    source, target = await make_tenant(database_url), await make_tenant(database_url)
    lines = [line(record("Prefers tea.")), line(record("Lives in Oslo."))]
    async with await system_connection(database_url) as conn:
        assert await transfer.import_(conn, source.project_id, lines, embedder) == (2, 0, 2)
    counting = CountingEmbedder(embedder)
    async with await system_connection(database_url) as conn:
        with pytest.raises(BadInput) as refused:
            await transfer.import_(conn, target.project_id, lines, counting, Limits())
    # today's answer was "imported 0 (2 already present)", after embedding every record
    assert refused.value.extensions == {"line": 1, "field": "id"}
    assert "belongs to another project on this server" in refused.value.message
    assert counting.texts == 0
    assert await stored(db, target.project_id) == 0
    # its own project still takes it again, adding nothing
    async with await system_connection(database_url) as conn:
        assert await transfer.import_(conn, source.project_id, lines, embedder) == (0, 2, 2)
