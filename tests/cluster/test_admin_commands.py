"""The admin API's commands as processes: `memql admin-token` prints the entry that lets its
token into a `memql serve` process (`MEMQL_ADMIN_TOKENS`), and nothing else in; a token pasted
into the setting stops the start in one line that does not echo it; `memql projects delete`
asks for `--yes`, then erases the project; `memql audit` shows who changed what, through the
command line or the admin API."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import httpx

from memql.service.admin import Actor
from memql.testing import ServeProcess, fresh_database, make_tenant


async def memql(database_url: str, *args: str, **env: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "memql.cli", *args,
        env={**os.environ, "DATABASE_URL": database_url, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


ADMIN = "/admin/graphql"


async def test_an_admin_token_lets_its_operator_into_a_served_admin_api(postgres):
    status, out, err = await memql(postgres, "admin-token", "ops.team")
    assert status == 0, err
    said, token = out.strip().splitlines()
    assert token.startswith("mqo_") and " " not in token
    entry = said.split(" add ", 1)[1].split(" to MEMQL_ADMIN_TOKENS", 1)[0]
    assert entry.startswith("ops.team:sha256:") and token not in said

    async with fresh_database(postgres) as url:
        workdir = Path(tempfile.mkdtemp(prefix="memql-admin-"))
        server = ServeProcess.on_database(url, workdir, env={"MEMQL_ADMIN_TOKENS": entry})
        try:
            await server.ready()
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                auth = {"Authorization": f"Bearer {token}"}
                answer = await http.post(
                    ADMIN, json={"query": "{ operator { name } }"}, headers=auth
                )
                assert answer.json() == {"data": {"operator": {"name": "ops.team"}}}
                other = (await memql(postgres, "admin-token", "ops.team"))[1].split()[-1]
                refused = await http.post(
                    ADMIN, json={"query": "{ operator { name } }"},
                    headers={"Authorization": f"Bearer {other}"},
                )  # fmt: skip
                assert refused.status_code == 401
                made = await http.post(
                    ADMIN, headers=auth,
                    json={"query": 'mutation { createProject(name: "served") { name } }'},
                )  # fmt: skip
                assert made.json() == {"data": {"createProject": {"name": "served"}}}
        finally:
            await asyncio.to_thread(server.stop)
        assert token not in server.output()

        status, out, _ = await memql(url, "projects", "list")
        assert status == 0 and "  served  entitled  " in out
        status, out, _ = await memql(url, "audit")
        assert status == 0
        [line] = out.strip().splitlines()
        assert line.split("  ")[2:5] == ["ops.team (admin-api)", "project.created", "served"]


async def test_a_token_pasted_into_the_setting_stops_the_start_without_echoing_it(postgres):
    token = (await memql(postgres, "admin-token", "ops"))[1].split()[-1]
    for value in (token, f"ops:{token}"):
        status, out, err = await memql(postgres, "serve", MEMQL_ADMIN_TOKENS=value)
        assert status == 2, (out, err)
        [line] = err.strip().splitlines()
        assert line.startswith("memql: MEMQL_ADMIN_TOKENS: entry 1 is not NAME:sha256:HEX")
        assert token not in err + out


async def test_projects_delete_asks_for_yes_then_erases_the_project_and_records_it(
    database_url, db
):
    tenant = await make_tenant(database_url)
    status, _, err = await memql(database_url, "projects", "delete", tenant.project_name)
    assert status == 1 and "add --yes" in err
    cur = await db.execute("select count(*) from projects where id = %s", (tenant.project_id,))
    assert (await cur.fetchone())[0] == 1

    status, out, err = await memql(database_url, "projects", "delete", tenant.project_name, "--yes")
    assert status == 0, err
    assert out.strip() == (
        f"deleted project {tenant.project_name} ({tenant.project_id}) with 0 memory versions,"
        " 1 keys and 0 webhooks"
    )
    cur = await db.execute(
        "select count(*) from api_keys where project_id = %s", (tenant.project_id,)
    )
    assert (await cur.fetchone())[0] == 0
    status, _, err = await memql(database_url, "projects", "delete", tenant.project_name, "--yes")
    assert status == 1
    assert err.strip() == (
        f"memql: no project named {tenant.project_name!r} (memql projects create NAME)"
    )

    status, out, _ = await memql(database_url, "audit", "--project", tenant.project_name)
    assert status == 0
    [line] = out.strip().splitlines()
    fields = line.split("  ")
    assert fields[2:6] == [
        f"{Actor.command_line().name} (cli)",
        "project.deleted",
        tenant.project_name,
        "-",
    ]
    assert fields[6] == '{"api_keys":1,"memory_versions":0,"webhooks":0}'
