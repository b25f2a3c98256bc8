"""No import points up: every module under src/memql imports only from its own layer and the
layers below it, as the table in docs/architecture.md ("Layers") orders them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "memql"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
APART = "client"  # a layer no module of another layer may import


def layers() -> list[tuple[int, str, list[str]]]:
    """(rank, name, module names relative to `memql`) per row of the Layers table."""
    text = ARCHITECTURE.read_text()
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        found = re.match(r"\| (\d+) (\w+) \| ([^|]+) \|", line)
        if found:
            names = re.findall(r"`([\w.]+)`", found.group(3))
            rows.append((int(found.group(1)), found.group(2), names))
    return rows


def module_names() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def layer_of(module: str, table: list[tuple[int, str, list[str]]]) -> tuple[int, str] | None:
    """The layer of the longest table name that is `module` or a package above it."""
    best: tuple[int, int, str] | None = None
    for rank, name, names in table:
        for prefix in names:
            covers = module == prefix or module.startswith(prefix + ".")
            if covers and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank, name)
    return (best[1], best[2]) if best else None


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The memql modules `path` imports anywhere in it (relative to `memql`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from memql.db import memories` imports the module memql.db.memories
            targets = [
                f"{node.module}.{a.name}"
                if f"{node.module}.{a.name}".removeprefix("memql.") in modules
                else node.module
                for a in node.names
            ]
        else:
            continue
        for target in targets:
            if target == "memql":
                found.add("__init__")
            elif target.startswith("memql."):
                found.add(target.removeprefix("memql."))
    return found


def test_the_layers_table_has_ten_ranked_layers():
    table = layers()
    assert [rank for rank, _, _ in table] == list(range(1, len(table) + 1))
    assert len(table) == 10


def test_every_module_has_a_layer():
    table = layers()
    unplaced = [m for m in module_names() if layer_of(m, table) is None]
    assert not unplaced, f"add these to the Layers table of docs/architecture.md: {unplaced}"


def test_no_package_spans_two_layers():
    """The table names top-level modules and packages only: a package sits on one floor whole,
    so no part of it can be placed on another."""
    nested = [name for _, _, names in layers() for name in names if "." in name]
    assert not nested, f"place whole packages, not their modules: {nested}"


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    table = layers()
    modules = module_names()
    upward = []
    for module, path in modules.items():
        here = layer_of(module, table)
        assert here is not None
        for target in sorted(imports_of(path, modules)):
            there = layer_of(target, table)
            assert there is not None, f"{module} imports {target}, which has no layer"
            if there[0] > here[0] or (there[1] == APART and here[1] != APART):
                upward.append(f"{module} ({here[1]}) imports {target} ({there[1]})")
    assert not upward, "imports that point up:\n" + "\n".join(upward)


@pytest.mark.parametrize(
    ("module", "target", "upward"),
    [
        ("db.tenants", "access.jwt", True),
        ("settings", "access.policy", True),
        ("metrics", "graphql.schema", True),
        ("service.memories", "db.session", False),
        ("service.memories", "webhooks.targets", False),
        ("webhooks.signing", "service.webhooks", True),
        ("webhook_delivery", "graphql.webhook_payload", False),
        ("graphql.schema", "client.types", True),
    ],
)
def test_the_walk_tells_up_from_down(module, target, upward):
    """The rule the walk applies, on imports the code once had and has now."""
    table = layers()
    here, there = layer_of(module, table), layer_of(target, table)
    assert here is not None and there is not None
    assert (there[0] > here[0] or (there[1] == APART and here[1] != APART)) is upward
