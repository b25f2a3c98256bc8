"""The unit level starts nothing: a test here that asks, directly or through another fixture,
for the database, the real model, a browser or Node.js belongs to another level."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent

# the fixtures that start something (tests.fix_db, tests.fix_embedders, tests.browser,
# tests.npm); every fixture of the running system stands on one of them. `database_url` and
# `embedder` choose their world at run time (`getfixturevalue`), so they are named too.
STARTS_SOMETHING = {
    "postgres",
    "model_postgres",
    "database_url",
    "local_model",
    "embedder",
    "chromium",
    "node",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE not in item.path.parents:
            continue
        started = STARTS_SOMETHING.intersection(getattr(item, "fixturenames", ()))
        if started:
            raise pytest.UsageError(
                f"{item.nodeid} starts {', '.join(sorted(started))}: move it to"
                " tests/service, tests/api or tests/cluster"
            )
