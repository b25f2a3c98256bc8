"""The README as a user runs it: its shell and Python blocks, in order, against a fresh
`memql serve` on a fresh data directory (embedded PostgreSQL, first-run `dev` project), then the
blocks of the pages whose examples continue its tour (TOUR), in the same session.

One bash session runs the shell blocks (so `KEY=...` carries over) and each Python block as a
script with the session's exported variables; a Python block headed `# path/module.py` is
written to that path and imported, as the page says the server finds it. The only rewrite is
the server address (a free port instead of 8000). Blocks that install, serve or run the test
suite are the setting of this test, not steps of it: they are listed in SETTING with the reason.

The venv is never activated, as the README says: the session's PATH does not hold it, so a bare
`memql ...` fails there as it would for a reader ("command not found").
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memql.testing import ServeProcess

ROOT = Path(__file__).resolve().parents[2]
# the README, then the pages the README sends the reader on to, in its order; their blocks use
# the tour's $KEY and $MEMQL_KEY (security.md then makes an `acme` project and key of its own)
TOUR = [ROOT / "README.md"] + [
    ROOT / "docs" / f"{name}.md" for name in ("mcp", "context", "security", "webhooks")
]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ADDRESS = "http://127.0.0.1:8000"
# a command only an activated venv would find: the first word of a command, after any
# VAR=value assignments, at a line's start or after |, ;, &&, || or $(
BARE = re.compile(r"(?:^|[|;&]\s*|\$\()\s*(?:\w+=\S*\s+)*(memql|pytest|pip|python)(?=\s|$)")

# blocks not run, by their first line: what this test does itself instead
SETTING = {
    "python3 -m venv .venv": "the install and `memql serve`: the tests run inside the install,"
    " and the test starts the server on a fresh data directory",
    ".venv/bin/pytest": "the test suite itself",
    "PYTHONPATH=$PWD MEMQL_ACCESS_POLICY=": "a second server with an app's own policy module",
    "def system_prompt(": "an excerpt of examples/chat_loop.py, which test_examples.py runs",
    ".venv/bin/memql webhooks add --project acme https://hooks.example.com": "a receiver on the"
    " internet:"
    " its name must resolve, and CI resolves none (test_webhooks.py registers a local one)",
}


@dataclass
class Block:
    language: str
    code: str
    line: int
    page: Path

    @property
    def first_line(self) -> str:
        return self.code.strip().splitlines()[0] if self.code.strip() else ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)} line {self.line}"


def page_blocks(page: Path) -> list[Block]:
    """The shell and Python blocks of one page, in order."""
    blocks = []
    fence = re.compile(r"^```(\w*)\s*$")
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opened = fence.match(lines[i])
        if opened and opened.group(1):
            start = i + 1
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                i += 1
            code = "\n".join(lines[start:i]) + "\n"
            blocks.append(Block(opened.group(1), code, start + 1, page))
        i += 1
    return [b for b in blocks if b.language in ("sh", "bash", "python")]


def readme_blocks() -> list[Block]:
    """The blocks of the README and of the pages that continue its tour, in the tour's order."""
    return [block for page in TOUR for block in page_blocks(page)]


def is_setting(block: Block) -> str | None:
    for start, reason in SETTING.items():
        if block.first_line.startswith(start):
            return reason
    return None


@pytest.fixture(scope="module")
async def fresh_server() -> AsyncIterator[tuple[str, Path]]:
    """`memql serve` as the README starts it, on a fresh data directory; yields (url, dir)."""
    workdir = Path(tempfile.mkdtemp(prefix="memql-readme-"))
    env = {"MEMQL_DATA_DIR": str(workdir / "data")}
    for name in ("DATABASE_URL", "REDIS_URL", "MEMQL_ACCESS_POLICY"):
        env[name] = None
    server = ServeProcess(env, workdir, "serve")
    try:
        await server.ready(within=240)
        yield server.url, workdir
    finally:
        # a clean stop also stops the embedded PostgreSQL
        await asyncio.to_thread(server.stop)


def test_every_block_is_run_or_named_as_setting():
    blocks = readme_blocks()
    assert blocks, "no shell or Python blocks found in the README"
    matched = {start for start in SETTING for b in blocks if b.first_line.startswith(start)}
    assert matched == set(SETTING), (
        f"SETTING names blocks the tour's pages no longer have: {set(SETTING) - matched}"
    )


def test_no_command_needs_an_activated_venv():
    """The README installs into .venv and never activates it: a shell block of the README or of
    a page of docs/ that calls memql, pytest, pip or python bare fails with "command not found"
    after the two set-up commands."""
    bare = []
    for page in PAGES:
        for block in page_blocks(page):
            if block.language not in ("sh", "bash"):
                continue
            for n, line in enumerate(block.code.splitlines()):
                command = line.split(" #", 1)[0]
                if command.lstrip().startswith("#"):
                    continue
                found = BARE.search(command)
                if found:
                    bare.append(f"{page.relative_to(ROOT)} line {block.line + n}: {line.strip()}")
    assert not bare, "write .venv/bin/<command>:\n" + "\n".join(bare)


def test_the_readme_runs_as_written(fresh_server):
    url, workdir = fresh_server
    # what a user's checkout looks like: the README's relative paths resolve from here
    home = workdir / "checkout"
    home.mkdir()
    (home / ".venv").symlink_to(Path(sys.prefix))
    (home / "examples").symlink_to(ROOT / "examples")
    parts = ["set -euo pipefail"]
    for n, block in enumerate(readme_blocks()):
        if is_setting(block):
            continue
        code = block.code.replace(ADDRESS, url)
        parts.append(f"echo {shlex.quote(f'=== {block.where}')}")
        named = re.fullmatch(r"# ([\w/]+)\.py", block.first_line)
        if block.language == "python" and named:
            # a module the README tells the reader to write: written there, then imported
            # the way its text says the server finds it (PYTHONPATH)
            path = home / f"{named.group(1)}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code, encoding="utf-8")
            module = named.group(1).replace("/", ".")
            parts.append(f'PYTHONPATH=$PWD .venv/bin/python -c "import {module}"')
        elif block.language == "python":
            script = home / f"block_{n}.py"
            script.write_text(code, encoding="utf-8")
            parts.append(f".venv/bin/python {shlex.quote(str(script))}")
        else:
            parts.append(code)
    # a reader's shell: the venv is not on PATH, even when this test runs inside it
    venv_bin = Path(sys.prefix, "bin").resolve()
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and Path(p).resolve() != venv_bin]
    env = {
        **os.environ,
        "PATH": os.pathsep.join(path),
        "MEMQL_URL": url,
        "MEMQL_DATA_DIR": str(workdir / "data"),
    }
    for name in ("DATABASE_URL", "MEMQL_KEY", "KEY"):
        env.pop(name, None)
    run = subprocess.run(
        ["bash", "-c", "\n".join(parts)],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    transcript = run.stdout + run.stderr
    assert run.returncode == 0, transcript
    assert '"errors"' not in run.stdout, transcript
    # what the tour promises
    assert '"outcome":"CREATED"' in run.stdout, transcript
    assert '"outcome":"ABSORBED"' in run.stdout, transcript
