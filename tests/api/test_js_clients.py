"""The npm clients frontend teams use, run against memql for real (installed with `npm ci` in
tests/js): relay-compiler and @graphql-codegen/cli compile realistic operations against
schema.graphql, and Apollo Client's persisted-queries link talks to a live server."""

# the `js_clients` fixture (tests/npm.py) installs tests/js from its lock file on first use

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
JS = Path(__file__).parents[1] / "js"
BIN = JS / "node_modules" / ".bin"


def tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is missing from tests/js/node_modules"
    return str(path)


async def run(*args: str, cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *args, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


def untyped(value: object) -> object:
    """`value` without the `__typename` fields Apollo adds to every selection."""
    if isinstance(value, dict):
        return {k: untyped(v) for k, v in value.items() if k != "__typename"}
    return value


def relay_project(tmp_path: Path, schema: str) -> Path:
    shutil.copytree(JS / "relay" / "src", tmp_path / "src")
    (tmp_path / "schema.graphql").write_text(schema)
    (tmp_path / "__generated__").mkdir()
    config = json.loads((JS / "relay" / "relay.config.json").read_text())
    config["schema"] = "./schema.graphql"
    (tmp_path / "relay.config.json").write_text(json.dumps(config))
    return tmp_path


async def test_relay_compiler_compiles_connections_refetchable_node_fragments_and_mutations(
    tmp_path, js_clients
):
    project = relay_project(tmp_path, (ROOT / "schema.graphql").read_text())
    code, out = await run(tool("relay-compiler"), "relay.config.json", cwd=project)
    assert code == 0, out
    generated = {p.name for p in (project / "__generated__").iterdir()}
    assert {
        "MemoryListPaginationQuery.graphql.js",  # forward pagination of the connection
        "MemoryListTimelineQuery.graphql.js",  # backward (last/before)
        "MemoryItemRefetchQuery.graphql.js",  # refetch through Query.node(id:)
        "RecallQuery.graphql.js",
        "SaveMutation.graphql.js",
    } <= generated
    refetch = (project / "__generated__" / "MemoryItemRefetchQuery.graphql.js").read_text()
    assert "node(id: $id)" in refetch


async def test_relay_compiler_rejects_a_schema_without_the_conventions(tmp_path, js_clients):
    """The check can fail: the same operations against a `PageInfo` without `startCursor` (as
    memql's was) do not compile."""
    schema = (ROOT / "schema.graphql").read_text()
    assert "  startCursor: String\n" in schema
    project = relay_project(
        tmp_path, schema.replace("  startCursor: String\n", "  start: String\n")
    )
    code, out = await run(tool("relay-compiler"), "relay.config.json", cwd=project)
    assert code != 0
    assert "startCursor" in out


@pytest.mark.parametrize("broken", [False, True])
async def test_graphql_codegen_generates_types_for_the_operations(tmp_path, broken, js_clients):
    documents = (JS / "operations" / "memories.graphql").read_text()
    if broken:
        documents = documents.replace("hasPreviousPage", "hasPreviousPages")
    (tmp_path / "operations.graphql").write_text(documents)
    out_file = tmp_path / "graphql.ts"
    config = {
        "overwrite": True,
        "schema": str(ROOT / "schema.graphql"),
        "documents": str(tmp_path / "operations.graphql"),
        "config": {"strictScalars": True, "scalars": {"DateTime": "string", "JSON": "unknown"}},
        "generates": {str(out_file): {"plugins": ["typescript", "typescript-operations"]}},
    }
    (tmp_path / "codegen.json").write_text(json.dumps(config))
    # run from tests/js, where the plugins are installed
    code, out = await run(
        tool("graphql-codegen"), "--config", str(tmp_path / "codegen.json"), cwd=JS
    )
    if broken:
        assert code != 0 and "hasPreviousPages" in out
        return
    assert code == 0, out
    types = out_file.read_text()
    for name in ("MemoriesPageQuery", "NodeByIdQuery", "RecallQuery", "SaveMutation"):
        assert f"export type {name} =" in types
    assert "totalCount: number" in types and "occurredAt?: string | null" in types


async def test_apollo_client_persisted_queries_miss_then_send_the_query_then_hit(
    server, tenant, node, js_clients
):
    name = f"Apq{uuid.uuid4().hex[:8]}"
    code, out = await run(
        node,
        str(JS / "apq.mjs"),
        f"{server}/graphql",
        tenant.key,
        "alice",
        name,
        cwd=JS,
    )
    assert code == 0, out
    report = json.loads(out.splitlines()[-1])
    expected = {"viewer": {"userId": "alice"}, "memories": {"totalCount": 0}}
    for label in ("post", "get"):
        assert [untyped(d) for d in report["results"][label]] == [expected, expected]
    exchanges = report["exchanges"]
    assert len(exchanges) == 6, exchanges

    def sent(exchange: dict) -> dict:
        if exchange["method"] == "GET":
            params = dict(exchange["params"])
            params["extensions"] = json.loads(params["extensions"])
            return params
        return exchange["body"]

    for offset, method in ((0, "POST"), (3, "GET")):
        miss, full, hit = exchanges[offset : offset + 3]
        # 1: the hash alone, unknown to the server
        assert miss["method"] == method
        assert "query" not in sent(miss) and sent(miss)["extensions"]["persistedQuery"]
        assert miss["answer"]["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"
        # 2: the query with its hash, which the server runs and learns
        assert "query" in sent(full) and full["status"] == 200
        assert untyped(full["answer"]["data"]) == expected
        # 3: the hash alone again, now known
        assert hit["method"] == method and "query" not in sent(hit)
        assert hit["status"] == 200 and "errors" not in hit["answer"]
        assert untyped(hit["answer"]["data"]) == expected
