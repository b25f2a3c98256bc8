"""Pieces of the HTTP conventions that need no server: the persisted-query store's bounds, the
metrics settings, and the masked JSON 500 of an unexpected failure."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from memql.graphql.persisted import PersistedQueries
from memql.http import errors as http_errors
from memql.settings import Settings


def code(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/json"), response.text
    return str(response.json()["errors"][0]["extensions"]["code"])


def test_the_store_keeps_the_most_recently_used_queries_up_to_its_capacity():
    store = PersistedQueries(2)
    store.put("p", "a", "query A { a }")
    store.put("p", "b", "query B { b }")
    assert store.get("p", "a") == "query A { a }"  # a is now the most recent
    store.put("p", "c", "query C { c }")
    assert (store.get("p", "a"), store.get("p", "b"), store.get("p", "c")) == (
        "query A { a }",
        None,
        "query C { c }",
    )
    assert len(store) == 2


def test_the_store_is_bounded_by_characters_too():
    store = PersistedQueries(100, max_chars=30)
    store.put("p", "a", "a" * 12)
    store.put("p", "b", "b" * 12)
    store.put("p", "c", "c" * 12)  # 36 characters: the oldest goes
    assert (store.get("p", "a"), len(store)) == (None, 2)
    store.put("p", "huge", "x" * 31)  # longer than the whole budget: not kept, nothing evicted
    assert (store.get("p", "huge"), len(store)) == (None, 2)
    store.put("p", "b", "b" * 12)  # the same hash again counts once
    assert (store.get("p", "b"), store.get("p", "c")) == ("b" * 12, "c" * 12)


def test_each_project_has_its_own_queries_and_its_own_bounds():
    store = PersistedQueries(2)
    store.put("mine", "a", "query A { a }")
    assert store.get("theirs", "a") is None  # a hash confirms nothing of another project
    for n in range(10):  # another project filling its store evicts only its own queries
        store.put("theirs", f"h{n}", f"query Q{n} {{ a }}")
    assert store.get("mine", "a") == "query A { a }"
    assert len(store) == 3


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


def test_metrics_settings_are_read_and_checked():
    from memql.errors import ConfigurationError

    s = Settings.from_env(
        {"MEMQL_METRICS_PORT": "9100", "MEMQL_METRICS_TOKEN": "t", "MEMQL_BATCH_MAX": "5"}
    )
    assert (s.metrics_port, s.metrics_token, s.batch_max) == (9100, "t", 5)
    assert Settings.from_env({}).batch_max == 0
    for env in (
        {"MEMQL_METRICS_PORT": "8000"},
        {"MEMQL_BATCH_MAX": "1000"},
        {"MEMQL_BATCH_MAX": "-1"},
        {"MEMQL_PERSISTED_QUERIES": "lots"},
    ):
        with pytest.raises(ConfigurationError):
            Settings.from_env(env)
