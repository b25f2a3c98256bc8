"""The admin API's transactions on the request pool (`db/admin.py`'s `pooled`): the owner's role
lasts one transaction, committed or failed, and the connection goes back to the pool as
`memql_app`, which row-level security binds; a change and its audit record commit together or
not at all."""

from __future__ import annotations

import uuid

import pytest

from memql.db import admin as db_admin
from memql.db.pool import APP_ROLE, open_pool
from memql.errors import BadInput, Conflict
from memql.model import JwtConfig
from memql.service.admin import Actor, Admin, Via

OPERATOR = Actor("tester", Via.ADMIN_API)


async def current_role(pool) -> str:
    async with pool.connection() as conn:
        cur = await conn.execute("select current_user")
        (role,) = await cur.fetchone()
        await conn.rollback()
        return str(role)


async def test_the_owners_role_lasts_one_transaction_and_the_connection_returns_as_the_app(
    database_url, db
):
    # one connection: the admin's transactions and the next request share it
    pool = await open_pool(database_url, min_size=1, max_size=1, wait=5)
    try:
        admin = Admin(
            lambda: db_admin.pooled(pool, timeout_seconds=5), allow_private_webhooks=False
        )
        name = f"sessions-{uuid.uuid4().hex[:10]}"
        assert await current_role(pool) == APP_ROLE
        async with db_admin.pooled(pool, timeout_seconds=5) as conn:
            cur = await conn.execute("select current_user = session_user")
            assert (await cur.fetchone())[0] is True  # the owner, for this transaction
        await admin.create_project(OPERATOR, name)
        assert await current_role(pool) == APP_ROLE
        with pytest.raises(Conflict):
            await admin.create_project(OPERATOR, name)
        assert await current_role(pool) == APP_ROLE
        with pytest.raises(BadInput):
            await admin.set_jwt(OPERATOR, name, JwtConfig("", "a", "s", None))
        assert await current_role(pool) == APP_ROLE
    finally:
        await pool.close()
    cur = await db.execute(
        "select action, actor, via from admin_audit where project_name = %s", (name,)
    )
    assert await cur.fetchall() == [("project.created", "tester", "admin-api")]


async def test_a_change_whose_record_cannot_be_written_does_not_commit(database_url, db):
    pool = await open_pool(database_url, min_size=1, max_size=1, wait=5)
    try:
        admin = Admin(
            lambda: db_admin.pooled(pool, timeout_seconds=5), allow_private_webhooks=False
        )
        name = f"sessions-{uuid.uuid4().hex[:10]}"
        # an actor the audit log refuses (longer than its 200 characters)
        with pytest.raises(BadInput):
            await admin.create_project(Actor("x" * 201, Via.ADMIN_API), name)
    finally:
        await pool.close()
    cur = await db.execute("select count(*) from projects where name = %s", (name,))
    assert (await cur.fetchone())[0] == 0
