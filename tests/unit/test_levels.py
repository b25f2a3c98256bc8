"""Every test module sits in the folder of its level (docs/development.md: unit, service, api,
cluster), so each level runs on its own; the fixture plugins every level loads cost the unit
level nothing; and a unit test module is named after the module it covers."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
LEVELS = {"unit", "service", "api", "cluster"}
# unit test modules that cover no one module, and what they cover instead
NOT_A_MODULE = {
    "test_api_records": "every transport against the records of memql.requests (schema.graphql,"
    " the MCP tools, the client's and the inspector's documents)",
    "test_layers": "the Layers table of docs/architecture.md, against every import",
    "test_levels": "the test folders themselves",
    "test_recall_evaluation_set": "the data of bench/recall (set/, background.json)",
}


def test_every_test_module_is_in_a_level_folder():
    misplaced = [
        str(p.relative_to(TESTS))
        for p in TESTS.rglob("test_*.py")
        if "node_modules" not in p.parts and p.parent.name not in LEVELS
    ]
    assert misplaced == [], f"move these into tests/<level>/: {misplaced}"


def test_the_levels_are_the_four_documented_ones():
    folders = {p.parent.name for p in TESTS.glob("*/test_*.py")}
    assert folders == LEVELS


def test_the_fixture_plugins_import_nothing_heavy_when_loaded():
    # every level loads them (pytest takes `pytest_plugins` from the root conftest only), so
    # memql, psycopg, playwright... are imported inside their fixtures, and `tests/unit` pays
    # only for what its own tests import
    conftest = TESTS / "conftest.py"
    plugins = ast.literal_eval(
        next(
            node.value
            for node in ast.parse(conftest.read_text()).body
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "pytest_plugins"
        )
    )
    light = set(sys.stdlib_module_names) | {"__future__", "pytest", "tests"}
    heavy = {}
    for path in [conftest, *(TESTS / f"{p.removeprefix('tests.')}.py" for p in plugins)]:
        for node in ast.parse(path.read_text()).body:  # the module level, not `if TYPE_CHECKING`
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            heavy.update({name: path.name for name in names if name.split(".")[0] not in light})
    assert heavy == {}, "import these inside the fixtures that need them"


def module_names() -> list[str]:
    """Every module of memql and the benchmarks, by its path with `_` for `/`
    (`memql/webhooks/signing.py` is `webhooks_signing`, a package is its `__init__`)."""
    names = []
    for base in (ROOT / "src" / "memql", ROOT / "bench"):
        for path in base.rglob("*.py"):
            parts = path.relative_to(base).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                names.append("_".join(parts))
    return names


def test_each_unit_test_module_is_named_after_the_one_module_it_covers():
    # test_<name>.py covers the module whose path is <name>, or ends in _<name> when no other
    # module's does (test_signing.py: webhooks/signing.py; test_http_errors.py, not
    # test_errors.py, as memql has several errors modules)
    modules = module_names()
    unnamed = {}
    for path in sorted((TESTS / "unit").glob("test_*.py")):
        name = path.stem.removeprefix("test_")
        if path.stem in NOT_A_MODULE:
            continue
        covered = [m for m in modules if m == name or m.endswith(f"_{name}")]
        if len(covered) != 1:
            unnamed[path.name] = covered
    assert unnamed == {}, (
        "name each after the module it covers, with as much of its package as tells it apart"
        " (or say in NOT_A_MODULE what it covers instead)"
    )
    assert all((TESTS / "unit" / f"{stem}.py").is_file() for stem in NOT_A_MODULE)
