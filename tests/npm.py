"""npm packages the tests need, installed from the lock files on first use, so the README's test
command passes on a fresh clone: the JS clients in tests/js (`npm ci`) and the browser files
GraphiQL is served with (web/build.py, which setup.py also runs at install time)."""

from __future__ import annotations

import fcntl
import runpy
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
JS = ROOT / "tests" / "js"


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One installer at a time per folder (concurrent pytest runs in one checkout)."""
    with (folder / ".install.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.fail("these tests need Node.js and npm (`apt-get install nodejs npm`)")
    return path


@pytest.fixture(scope="session")
def js_clients(node: str) -> Path:
    """tests/js with its node_modules (graphql-ws, graphql-http), `npm ci` when missing."""
    with locked(JS):
        lock = JS / "package-lock.json"
        installed = JS / "node_modules" / ".package-lock.json"
        if not installed.is_file() or installed.stat().st_mtime < lock.stat().st_mtime:
            subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS, check=True
            )
    return JS


@pytest.fixture(scope="session")
def web_assets(node: str) -> Path:
    """GraphiQL's files in the package (built from web/package-lock.json when missing)."""
    from memql.http import web

    if not web.assets_built():
        with locked(ROOT / "web"):
            if not web.assets_built():
                runpy.run_path(str(ROOT / "web" / "build.py"))["build"](web.VENDOR)
    return web.VENDOR
