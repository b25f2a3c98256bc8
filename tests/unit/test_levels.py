"""Every test module sits in the folder of its level (docs/development.md: unit, service, api,
cluster), so each level runs on its own and its fixtures come from its own conftest."""

from __future__ import annotations

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
