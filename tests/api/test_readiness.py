"""/readyz tells the truth about the broadcast: with Redis unreachable the server is not ready."""

from __future__ import annotations

import asyncio
import socket

import httpx

from memql.settings import Settings
from memql.testing import serving


def dead_redis_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{s.getsockname()[1]}/0"


async def test_readyz_is_503_naming_redis_while_the_broadcast_is_unreachable(
    database_url, embedder
):
    settings = Settings(database_url=database_url, redis_url=dead_redis_url())
    async with (
        asyncio.timeout(60),
        serving(settings, embedder) as url,
        httpx.AsyncClient(base_url=url, timeout=10) as http,
    ):
        ready = await http.get("/readyz")
        assert ready.status_code == 503, ready.text
        body = ready.json()
        assert body["status"] == "unavailable"
        assert body["broadcast"]["state"] != "up"
        assert body["errors"][0]["extensions"]["code"] == "SERVICE_UNAVAILABLE"
        assert "REDIS_URL" in body["errors"][0]["message"]
        assert (await http.get("/healthz")).status_code == 200  # alive, only not ready


async def test_readyz_is_200_with_the_broadcast_up(server):
    async with httpx.AsyncClient(base_url=server, timeout=10) as http:
        ready = await http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["broadcast"]["state"] == "up"
