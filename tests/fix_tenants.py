"""Tenants: a fresh project per test, with an agent API key (and, for browser tokens, a JWT
secret), so tests never see each other's memories.

memql is imported inside the fixtures, so loading this plugin costs `tests/unit` nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from memql.testing import Tenant


@pytest.fixture
async def tenant(database_url: str) -> Tenant:
    """A fresh project with an agent API key, so tests never see each other's memories."""
    from memql.testing import make_tenant

    return await make_tenant(database_url)


@pytest.fixture
async def jwt_tenant(database_url: str) -> tuple[Tenant, str]:
    """A fresh project that also trusts browser tokens signed with the returned HS256 secret."""
    from memql.db import tenants
    from memql.db.pool import owner_connection
    from memql.model import JwtConfig
    from memql.testing import make_tenant

    tenant = await make_tenant(database_url)
    secret = "a-shared-secret-of-32-bytes-or-more-" + tenant.project_name
    async with await owner_connection(database_url, autocommit=True) as conn:
        await tenants.set_project_jwt(
            conn,
            tenant.project_name,
            JwtConfig(f"https://{tenant.project_name}.example", "memql", secret, None),
        )
    return tenant, secret
