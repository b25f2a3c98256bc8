"""`memql.http.errors`: an unexpected failure is a masked JSON 500 whose error id is in the log,
never the failure's own words."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.routing import Route

from memql.http import errors as http_errors


def code(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/json"), response.text
    return str(response.json()["errors"][0]["extensions"]["code"])


async def test_an_unexpected_failure_is_a_masked_json_500_with_an_error_id(caplog):
    async def broken(request):
        raise RuntimeError("secret detail")

    app = Starlette(
        routes=[Route("/x", broken)],
        exception_handlers={Exception: http_errors.unexpected},
    )
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/x")
    assert (response.status_code, code(response)) == (500, "INTERNAL_SERVER_ERROR")
    assert "secret" not in response.text
    assert response.json()["errors"][0]["extensions"]["errorId"] in caplog.text
