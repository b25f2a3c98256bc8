"""A GraphQL client for tests: one user of one project over real HTTP, with answers checked."""

from __future__ import annotations

from typing import Any

import httpx


class GraphQLClient:
    """Sends operations to `/graphql` with an API key and an `X-User-Id` (either may be None,
    to send none). `ok` and `error` fail the calling test (AssertionError) when the answer is
    not what they expect."""

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
        """The whole answer of an operation (HTTP 200 or 400 expected)."""
        response = await self.http.post(
            "/graphql", json={"query": query, "variables": variables or {}}, headers=self.headers()
        )
        if response.status_code not in (200, 400):
            raise AssertionError(f"HTTP {response.status_code}: {response.text}")
        body: dict[str, Any] = response.json()
        return body

    async def ok(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run an operation that must succeed; return its data."""
        body = await self.raw(query, variables)
        if "errors" in body:
            raise AssertionError(body["errors"])
        data: dict[str, Any] = body["data"]
        return data

    async def error(self, query: str, variables: dict[str, Any] | None = None) -> str:
        """Run an operation that must fail; return its `extensions.code`."""
        body = await self.raw(query, variables)
        if not body.get("errors"):
            raise AssertionError(f"expected an error, got {body}")
        code: str = body["errors"][0]["extensions"]["code"]
        return code

    def as_user(self, user: str) -> GraphQLClient:
        return GraphQLClient(self.http, self.key, user)
