"""`memql import` and `memql export` as processes: on a terminal they draw a progress bar on
stderr (count, rate, and the time left when the total is known), piped they print their
summary line alone, and the export's data on stdout is the same bytes either way."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import struct
import sys
import termios
from pathlib import Path

import pytest

from memql.testing import make_tenant
from tests.service.test_import_hygiene import line, record, stored

# the import embeds with the configured (real) model: it writes into the model's database
pytestmark = pytest.mark.model

RECORDS = 7
# tqdm's bar with a total: "<desc>: 100%|█████| 7/7 [00:00<00:00, 12.3memory/s]"
WITH_TOTAL = re.compile(
    r": 100%\|.*\| (\d+)/(\d+) \[\d\d:\d\d<\d\d:\d\d, +[\d.]+(memory/s|s/memory)\]"
)
# without one (a pipe): "<desc>: 7memory [00:00, 12.3memory/s]"
WITHOUT_TOTAL = re.compile(r": (\d+)memory \[\d\d:\d\d, +[\d.]+(memory/s|s/memory)\]")
BAR_TRACES = ("\r", "memory/s", "s/memory", "%|")


def read_terminal(master: int) -> bytes:
    """Everything written to a pseudo-terminal, until its last writer closes it."""
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


async def memql(
    database_url: str, *args: str, terminal: bool, stdin: bytes | None = None
) -> tuple[int, bytes, str]:
    """Run the command line with its stderr on a pseudo-terminal (`terminal`) or a pipe, its
    stdout on a pipe; its status, stdout, and stderr as text."""
    master = slave = None
    if terminal:
        master, slave = pty.openpty()
        # a terminal of 120 columns, as tqdm sizes its bar to it
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "memql.cli", *args,
        env={**os.environ, "DATABASE_URL": database_url},
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=slave if slave is not None else asyncio.subprocess.PIPE,
    )  # fmt: skip
    if master is not None and slave is not None:
        os.close(slave)
        reading = asyncio.create_task(asyncio.to_thread(read_terminal, master))
    out, err = await process.communicate(stdin)
    if master is not None:
        err = await reading
        os.close(master)
    assert process.returncode is not None
    return process.returncode, out, err.decode()


def export_file(path: Path) -> Path:
    path.write_text(
        "".join(line(record(f"Fact number {i} of the set.")) + "\n" for i in range(RECORDS))
    )
    return path


async def test_an_import_and_an_export_on_a_terminal_show_count_rate_and_time_left(
    database_url, db, tmp_path
):
    tenant = await make_tenant(database_url)
    path = export_file(tmp_path / "memories.jsonl")

    status, _, err = await memql(
        database_url, "import", "--project", tenant.project_name, str(path), terminal=True
    )
    assert status == 0, err
    bar = WITH_TOTAL.findall(err)
    assert bar and bar[-1][:2] == (str(RECORDS), str(RECORDS)), err
    assert f"importing into {tenant.project_name}: 100%" in err
    assert f"imported {RECORDS} memory versions" in err
    assert await stored(db, tenant.project_id) == RECORDS

    status, on_terminal, err = await memql(
        database_url, "export", "--project", tenant.project_name, terminal=True
    )
    assert status == 0, err
    bar = WITH_TOTAL.findall(err)
    assert bar and bar[-1][:2] == (str(RECORDS), str(RECORDS)), err
    assert f"exporting {tenant.project_name}: 100%" in err
    assert "Fact number" not in err, "the data went to the terminal"

    status, piped, err = await memql(
        database_url, "export", "--project", tenant.project_name, terminal=False
    )
    assert status == 0, err
    assert err.strip().splitlines()[-1] == (
        f"exported {RECORDS} memory versions of {tenant.project_name}"
    )
    assert not any(trace in err for trace in BAR_TRACES), err
    assert on_terminal == piped, "the exported data changed with the progress bar"
    assert len(piped.decode().splitlines()) == RECORDS


async def test_an_import_from_a_pipe_on_a_terminal_shows_count_and_rate_without_a_total(
    database_url, db, tmp_path
):
    tenant = await make_tenant(database_url)
    data = export_file(tmp_path / "memories.jsonl").read_bytes()
    status, _, err = await memql(
        database_url, "import", "--project", tenant.project_name, "-", terminal=True, stdin=data
    )
    assert status == 0, err
    counted = WITHOUT_TOTAL.findall(err)
    assert counted and counted[-1][0] == str(RECORDS), err
    assert "%|" not in err
    assert await stored(db, tenant.project_id) == RECORDS


async def test_piped_or_asked_not_to_the_commands_print_their_summary_alone(
    database_url, db, tmp_path
):
    tenant = await make_tenant(database_url)
    path = export_file(tmp_path / "memories.jsonl")
    status, _, err = await memql(
        database_url, "import", "--project", tenant.project_name, str(path), terminal=False
    )
    assert status == 0, err
    assert not any(trace in err for trace in BAR_TRACES), err
    assert err.strip().splitlines()[-1].startswith(f"imported {RECORDS} memory versions")

    for command in (
        ["import", "--project", tenant.project_name, str(path), "--no-progress"],
        ["export", "--project", tenant.project_name, "--no-progress"],
    ):
        status, _, err = await memql(database_url, *command, terminal=True)
        assert status == 0, err
        assert not any(trace in err for trace in ("memory/s", "s/memory", "%|")), err
