"""GraphiQL on a machine with no internet: in headless Chromium with every request beyond
loopback refused, the explorer renders, runs a query, and delivers a subscription's events."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from memql.testing import newest_cursor
from tests.browser import WATCH_POLICY
from tests.operations import SAVE

RESPONSE = ".graphiql-response"


async def open_graphiql(offline, server: str, tenant, user: str, query: str):
    await offline.context.add_init_script(WATCH_POLICY)
    page = await offline.context.new_page()
    await page.goto(f"{server}/graphql")
    await page.locator(".graphiql-execute-button").wait_for(timeout=20_000)
    # what a user does: the operation in the editor, the credentials in the Headers pane
    headers = json.dumps({"Authorization": f"Bearer {tenant.key}", "X-User-Id": user})
    await page.get_by_role("button", name="Headers").click()
    await page.evaluate(
        """([query, headers]) => {
          document.querySelector(".graphiql-query-editor .CodeMirror").CodeMirror.setValue(query);
          const tools = document.querySelectorAll(".graphiql-editor-tool .CodeMirror");
          tools[tools.length - 1].CodeMirror.setValue(headers);
        }""",
        [query, headers],
    )
    return page


async def stored_text(page) -> str:
    """Everything the page left in the browser's storage."""
    return await page.evaluate(
        "JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage)])"
    )


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
    assert await page.evaluate("window.violations") == []  # its policy forbade nothing it needs


@pytest.mark.usefixtures("web_assets")
async def test_graphiql_keeps_no_credentials_in_storage_and_takes_no_operation_from_the_link(
    offline, server, tenant
):
    page = await open_graphiql(offline, server, tenant, "alice", "{ viewer { userId } }")
    await page.locator(".graphiql-execute-button").click()
    await page.locator(RESPONSE).filter(has_text='"userId": "alice"').wait_for(timeout=20_000)
    await page.reload()
    await page.locator(".graphiql-execute-button").wait_for(timeout=20_000)
    stored = await stored_text(page)
    assert "viewer { userId }" in stored  # GraphiQL keeps the operation...
    assert "graphiql:queries" in stored  # ...in its history too...
    assert tenant.key not in stored  # ...but never the key

    planted = "mutation Planted { eraseUserMemories { erased } }"
    await page.goto(f"{server}/graphql?q={quote(planted)}")
    await page.locator(".graphiql-execute-button").wait_for(timeout=20_000)
    editor = await page.evaluate(
        "document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.getValue()"
    )
    assert "Planted" not in editor


@pytest.mark.usefixtures("web_assets")
async def test_graphiql_delivers_a_subscription_with_no_internet(
    offline, server, tenant, alice, db
):
    since = await newest_cursor(db, tenant.project_id)
    subscription = (
        f'subscription Live {{ memoryEvents(since: "{since}") {{ type memory {{ content }} }} }}'
    )
    page = await open_graphiql(offline, server, tenant, "alice", subscription)
    # GraphiQL learns which operation the editor holds a moment after it changes (and keeps it
    # in its tab state); a click before that runs an unnamed operation, which its fetcher sends
    # over HTTP, not the websocket
    await page.wait_for_function(
        """() => (localStorage.getItem("graphiql:tabState") || "")
                   .includes('"operationName":"Live"')""",
        timeout=20_000,
    )
    await page.locator(".graphiql-execute-button").click()
    await alice.ok(SAVE, {"input": {"content": "Keeps a paper notebook.", "kind": "TOPICAL"}})
    response = page.locator(RESPONSE)
    await response.filter(has_text="Keeps a paper notebook.").wait_for(timeout=20_000)
    assert '"type": "memory.created"' in await response.inner_text()
    assert offline.blocked == []
    assert await page.evaluate("window.violations") == []
