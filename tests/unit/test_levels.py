"""Every test module sits in the folder of its level (docs/development.md: unit, service, api,
cluster), so each level runs on its own, and the fixture plugins every level loads cost the unit
level nothing."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
LEVELS = {"unit", "service", "api", "cluster"}


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
