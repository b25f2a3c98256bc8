"""`memql keys` as a process, on the real database: a key created with a name and an expiry is
listed with its name, consumer, created, last used, expiry and state (active, expired,
revoked); a bad name or expiry is refused in one line with exit status 2, and no key is made."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime, timedelta

import pytest

from memql.access.credentials import hash_key
from memql.db import tenants
from memql.db.pool import owner_connection
from memql.testing import make_tenant


async def memql(database_url: str, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "memql.cli", *args,
        env={**os.environ, "DATABASE_URL": database_url},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def key_count(db, project_id) -> int:
    cur = await db.execute("select count(*) from api_keys where project_id = %s", (project_id,))
    (count,) = await cur.fetchone()
    return int(count)


def instant(line: str, label: str) -> datetime:
    """The time a listing line gives after `label` (ISO-8601, UTC)."""
    return datetime.fromisoformat(line.split(f"  {label} ", 1)[1].split("  ", 1)[0])


async def test_a_named_expiring_key_is_listed_with_every_field(database_url, db):
    tenant = await make_tenant(database_url)
    created_before = datetime.now(UTC).replace(microsecond=0)
    status, out, err = await memql(
        database_url, "keys", "create", "--project", tenant.project_name,
        "--name", "ci deploy", "--consumer", "client", "--expires-in", "30d",
    )  # fmt: skip
    assert status == 0, err
    *said, key = out.strip().splitlines()
    assert key.startswith("mq_") and " " not in key
    assert "'ci deploy'" in said[0] and "expiring 20" in said[0], said

    status, out, err = await memql(database_url, "keys", "list", "--project", tenant.project_name)
    assert status == 0, err
    lines = [line for line in out.splitlines() if "'ci deploy'" in line]
    assert len(lines) == 1, out
    [line] = lines
    key_id = line.split()[0]
    assert f"  {tenant.project_name}  {key[:11]}…  'ci deploy'  client  created " in line, line
    assert "  last used never  " in line and line.endswith("  active"), line
    created, expires = instant(line, "created"), instant(line, "expires")
    assert created_before <= created <= datetime.now(UTC)
    assert abs(expires - created - timedelta(days=30)) <= timedelta(seconds=2)

    # used once (what a request's lookup records), then revoked
    async with await owner_connection(database_url, autocommit=True) as conn:
        assert await tenants.find_api_key(conn, hash_key(key)) is not None
    status, out, _ = await memql(database_url, "keys", "list", "--project", tenant.project_name)
    [line] = [line for line in out.splitlines() if line.startswith(key_id)]
    assert created <= instant(line, "last used") <= datetime.now(UTC)
    assert (await memql(database_url, "keys", "revoke", key_id))[0] == 0
    status, out, _ = await memql(database_url, "keys", "list", "--project", tenant.project_name)
    [line] = [line for line in out.splitlines() if line.startswith(key_id)]
    assert "  revoked 20" in line, line


async def test_an_expires_at_is_kept_to_the_second_and_a_past_expiry_lists_as_expired(
    database_url, db
):
    tenant = await make_tenant(database_url)
    at = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    offset = at.astimezone(datetime.now().astimezone().tzinfo).isoformat()
    status, _, err = await memql(
        database_url, "keys", "create", "--project", tenant.project_name, "--expires-at", offset
    )
    assert status == 0, err
    status, _, err = await memql(
        database_url, "keys", "create", "--project", tenant.project_name, "--expires-in", "1s"
    )
    assert status == 0, err
    await asyncio.sleep(1.1)
    status, out, _ = await memql(database_url, "keys", "list", "--project", tenant.project_name)
    by_expiry = {line.split("  expires ")[1].split()[0]: line for line in out.splitlines()}
    assert len(by_expiry) == 3, out  # the tenant's own key, and the two
    assert by_expiry.pop("never").endswith("  active")  # the tenant's own
    assert by_expiry.pop(at.isoformat().replace("+00:00", "Z")).endswith("  active")
    [expired] = by_expiry.values()
    assert expired.endswith("  expired") and "  unnamed  agent  " in expired, expired


BAD = [
    (["--expires-in", "30x"], "memql: --expires-in '30x' is not a duration"),
    (["--expires-in", "0s"], "memql: --expires-in '0s' is no time at all"),
    (["--expires-in", "1.5h"], "memql: --expires-in '1.5h' is not a duration"),
    (["--expires-in", "36600d"], "memql: --expires-in '36600d' is more than 100 years"),
    (["--expires-in=-5s"], "memql: --expires-in '-5s' is not a duration"),
    (["--expires-at", "2020-01-01T00:00:00Z"], "memql: --expires-at '2020-01-01T00:00:00Z' is in"),
    (["--expires-at", "2030-01-01T00:00"], "memql: --expires-at '2030-01-01T00:00' has no UTC"),
    (["--expires-at", "next week"], "memql: --expires-at 'next week' is not an ISO-8601"),
    (["--name", " "], "memql: a key's name is 1 to 100 characters"),
    (["--name", "a\tb"], "memql: a key's name holds no control"),
]


@pytest.mark.parametrize(("extra", "says"), BAD, ids=[" ".join(e) for e, _ in BAD])
async def test_a_bad_name_or_expiry_is_refused_in_one_line_with_status_2_and_makes_no_key(
    database_url, db, extra, says
):
    tenant = await make_tenant(database_url)
    before = await key_count(db, tenant.project_id)
    status, out, err = await memql(
        database_url, "keys", "create", "--project", tenant.project_name, *extra
    )
    assert status == 2, (out, err)
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(says), err
    assert await key_count(db, tenant.project_id) == before
