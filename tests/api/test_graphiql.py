"""GraphiQL on a machine with no internet: in headless Chromium with every request beyond
loopback refused, the explorer renders, runs a query, and delivers a subscription's events."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from memql.testing import newest_cursor
from tests.operations import SAVE

RESPONSE = ".graphiql-response"


async def open_graphiql(offline, server: str, tenant, user: str, query: str):

    headers = json.dumps({"Authorization": f"Bearer {tenant.key}", "X-User-Id": user})
    # what a user types into the Headers pane, as GraphiQL keeps it between visits
    await offline.context.add_init_script(
        f"window.localStorage.setItem('graphiql:headers', {json.dumps(headers)});"
    )
    page = await offline.context.new_page()
    await page.goto(f"{server}/graphql?q={quote(query)}")
    await page.locator(".graphiql-execute-button").wait_for(timeout=20_000)
    return page


@pytest.mark.usefixtures("web_assets")
async def test_graphiql_runs_a_query_with_no_internet(offline, server, tenant):
    page = await open_graphiql(
        offline, server, tenant, "alice", "query Who { viewer { userId consumer } }"
    )
    await page.locator(".graphiql-execute-button").click()
    response = page.locator(RESPONSE)
    await response.filter(has_text='"userId": "alice"').wait_for(timeout=20_000)
    assert '"consumer": "AGENT"' in await response.inner_text()
    assert offline.blocked == []  # the page never reached for the internet


@pytest.mark.usefixtures("web_assets")
async def test_graphiql_delivers_a_subscription_with_no_internet(
    offline, server, tenant, alice, db
):
    since = await newest_cursor(db, tenant.project_id)
    subscription = (
        f'subscription Live {{ memoryEvents(since: "{since}") {{ type memory {{ content }} }} }}'
    )
    page = await open_graphiql(offline, server, tenant, "alice", subscription)
    await page.locator(".graphiql-execute-button").click()
    await alice.ok(SAVE, {"input": {"content": "Keeps a paper notebook.", "kind": "TOPICAL"}})
    response = page.locator(RESPONSE)
    await response.filter(has_text="Keeps a paper notebook.").wait_for(timeout=20_000)
    assert '"type": "memory.created"' in await response.inner_text()
    assert offline.blocked == []
