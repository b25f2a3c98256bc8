"""The inspector at /inspector, end to end in headless Chromium with no internet: sign in, browse,
recall with each score's signals, a memory's versions, and a live feed that shows a save made
through the API without a reload and resumes with `since` after the connection drops."""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.async_api import expect

from memql.http import web
from memql.settings import Settings
from memql.testing import GraphQLClient, Tenant, serving
from tests.browser import WATCH_POLICY
from tests.operations import SAVE
from tests.proxy import TcpProxy

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
async def proxy(server) -> AsyncIterator[TcpProxy]:
    """The server behind a TCP proxy the test can cut, as a flaky network would."""
    target = urlsplit(server)
    proxy = TcpProxy(target.hostname, target.port)
    await proxy.start()
    yield proxy
    await proxy.stop()


async def save(client: GraphQLClient, content: str, **fields) -> str:
    data = await client.ok(SAVE, {"input": {"content": content, "kind": "TOPICAL", **fields}})
    return data["saveMemory"]["memory"]["id"]


async def sign_in_with_key(page, base: str, tenant: Tenant, user: str) -> None:
    await page.goto(base + "/inspector")
    await page.fill("input[name=key]", tenant.key)
    await page.fill("input[name=userId]", user)
    await page.click("#sign-in-form button[type=submit]")
    await page.locator("#viewer-user", has_text=user).wait_for(timeout=20_000)
    await page.locator("#feed-status[data-state=live]").wait_for(timeout=20_000)


def feed_item(page, text: str):
    return page.locator("#feed li", has_text=text)


async def test_the_inspector_shows_memories_recall_history_and_a_live_feed(
    offline, proxy, alice, tenant, tmp_path
):
    await save(alice, "Prefers concise status updates.", category="communication", pinned=True)
    await save(alice, "Works from Lisbon, on Central European hours.", category="profile")
    await save(
        alice,
        "Deploys go through the staging cluster first.",
        kind="OPERATIONAL",
        scope="PROJECT",
        category="ops",
    )
    await save(alice, "Prefers email for anything long.", key="contact-channel")
    await save(alice, "Prefers Slack for anything long.", key="contact-channel")

    await offline.context.add_init_script(WATCH_POLICY)
    page = await offline.context.new_page()
    await sign_in_with_key(page, proxy.url, tenant, "alice")
    assert page.url == proxy.url + "/inspector/"
    await page.evaluate("window.openedOnce = true")  # gone if the page ever reloads

    # browse and filter
    cards = page.locator("#memory-list li")
    await cards.filter(has_text="Prefers Slack").wait_for()
    assert await cards.count() == 4  # the superseded version is not live
    await page.fill("#filters input[name=contains]", "staging")
    await page.click("#filters button[type=submit]")
    await cards.filter(has_text="staging cluster").wait_for()
    await expect(cards).to_have_count(1)
    await page.fill("#filters input[name=contains]", "")
    await page.click("#filters button[type=submit]")
    await expect(cards).to_have_count(4)

    # a save through the API appears in the open page's feed, and in its list, without a reload
    await save(alice, "Is allergic to peanuts.", category="health", pinned=True)
    await feed_item(page, "Is allergic to peanuts.").wait_for(timeout=20_000)
    assert "created" in (await feed_item(page, "Is allergic to peanuts.").inner_text()).lower()
    await cards.filter(has_text="Is allergic to peanuts.").wait_for(timeout=20_000)
    assert await page.evaluate("window.openedOnce") is True

    # a memory's versions, oldest first
    await cards.filter(has_text="Prefers Slack").click()
    history = page.locator("#history li")
    await history.filter(has_text="Prefers Slack").wait_for()
    assert [text.split("\n")[0] for text in await history.all_inner_texts()] == [
        "Prefers email for anything long.",
        "Prefers Slack for anything long.",
    ]
    assert await page.is_visible("#retire")  # the agent key writes user scope
    # the fields the detail view has words for, in its order, then any other by its own name
    terms = await page.locator("#detail-fields dt").all_inner_texts()
    assert terms == [
        *("id", "kind", "scope", "category", "key", "pinned", "created", "updated", "model"),
        "supersedes",
    ]

    # retire from the page: the feed reports it, the list drops it
    await cards.filter(has_text="Works from Lisbon").click()
    await page.locator("#detail-content", has_text="Works from Lisbon").wait_for()
    await page.click("#retire")
    await page.locator("#feed li.memory-retired", has_text="Works from Lisbon").wait_for()
    await page.locator("#restore").wait_for()
    await expect(cards).to_have_count(4)
    await cards.filter(has_text="Prefers Slack").click()
    await history.filter(has_text="Prefers Slack").wait_for()

    # recall, each score with its signals
    await page.click("[role=tab][data-tab=recall]")
    await page.fill("#recall-form input[name=query]", "how should I send this user updates?")
    await page.click("#recall-form button[type=submit]")
    hits = page.locator("#recall-hits li")
    await hits.first.wait_for(timeout=20_000)
    assert "Prefers concise status updates." in await hits.first.inner_text()
    signals = hits.first.locator(".signal")
    assert [await s.locator(".name").inner_text() for s in await signals.all()] == [
        "vector",
        "lexical",
        "recency",
        "pinned",
    ]
    values = [float(await s.locator(".value").inner_text()) for s in await signals.all()]
    assert all(0.0 <= v <= 1.0 for v in values) and values[3] == 1.0  # it is pinned
    score = float(await hits.first.locator(".score").inner_text())
    assert 0.0 < score <= 1.0
    pinned_bar = signals.nth(3).locator(".bar i")
    assert await pinned_bar.evaluate("i => i.style.width") == "100%"
    assert await page.evaluate("window.violations") == []  # the page's policy blocked nothing

    # docs/inspector.png is this screenshot: MEMQL_DOCS_SCREENSHOTS=1 writes it there
    screenshot = DOCS if os.environ.get("MEMQL_DOCS_SCREENSHOTS") == "1" else tmp_path
    screenshot /= "inspector.png"
    await page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000
    assert offline.blocked == []


async def test_the_feed_resumes_with_since_after_the_connection_drops(
    offline, proxy, alice, tenant
):
    page = await offline.context.new_page()
    await sign_in_with_key(page, proxy.url, tenant, "alice")
    await save(alice, "Takes the 8:10 train.")
    await feed_item(page, "Takes the 8:10 train.").wait_for(timeout=20_000)

    # the network drops; a save happens while the page cannot connect
    proxy.refusing = True
    proxy.cut()
    await page.locator("#feed-status[data-state=reconnecting]").wait_for(timeout=20_000)
    await save(alice, "Switched to the 7:40 train.")
    proxy.refusing = False

    # once back, the feed replays what it missed from its last cursor, once
    await feed_item(page, "Switched to the 7:40 train.").wait_for(timeout=30_000)
    await page.locator("#feed-status[data-state=live]").wait_for(timeout=20_000)
    assert "resumed after cursor" in await page.inner_text("#feed-note")
    assert await feed_item(page, "Takes the 8:10 train.").count() == 1
    assert await feed_item(page, "Switched to the 7:40 train.").count() == 1
    cursors = await page.eval_on_selector_all(
        "#feed li", "items => items.map(i => Number(i.dataset.cursor))"
    )
    assert cursors == sorted(cursors, reverse=True)  # newest first, in cursor order


async def test_the_live_feed_speaks_graphql_transport_ws_through_the_graphql_ws_library(
    offline, server, alice, tenant
):
    page = await offline.context.new_page()
    loaded: list[str] = []
    page.on("request", lambda request: loaded.append(urlsplit(request.url).path))
    sent: list[dict] = []

    def watch(socket) -> None:
        socket.on("framesent", lambda frame: sent.append(json.loads(frame)))

    page.on("websocket", watch)
    await sign_in_with_key(page, server, tenant, "alice")
    await save(alice, "Reads the news at breakfast.")
    await feed_item(page, "Reads the news at breakfast.").wait_for(timeout=20_000)

    # the library came from the package's vendor files (npm, at build time), not the internet
    assert "/assets/vendor/graphql-ws.min.js" in loaded
    assert await page.evaluate("typeof globalThis.graphqlWs.createClient") == "function"
    assert offline.blocked == []
    # what went over the socket is the library's: its init, then a subscription whose id is
    # the library's generated UUID, carrying the feed's `since`
    init, subscribe = sent[0], next(m for m in sent if m["type"] == "subscribe")
    assert init == {
        "type": "connection_init",
        "payload": {"Authorization": f"Bearer {tenant.key}", "X-User-Id": "alice"},
    }
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", subscribe["id"]
    )
    assert "memoryEvents" in subscribe["payload"]["query"]
    assert "since" in subscribe["payload"]["variables"]
    # the page's own module has no protocol client of its own any more
    module = (Path(web.__file__).parent / "inspector" / "graphql.js").read_text()
    assert "new WebSocket" not in module and "connection_init" not in module


async def test_refused_credentials_end_the_feed_with_the_reason_instead_of_retrying(
    offline, server
):
    page = await offline.context.new_page()
    await page.goto(server + "/inspector/")
    statuses = await page.evaluate(
        """async () => {
          const { EventFeed } = await import("/inspector/graphql.js");
          const seen = [];
          const url = location.origin.replace(/^http/, "ws") + "/graphql";
          const feed = new EventFeed(url, { kind: "key", key: "mq_not_a_key", userId: "eve" }, {
            query: "subscription { memoryEvents { cursor } }",
            onEvent: () => {},
            onStatus: (name, note = "") => seen.push([name, note]),
          });
          await feed.start();
          const deadline = Date.now() + 15000;
          while (!seen.some(([name]) => name === "refused") && Date.now() < deadline)
            await new Promise((resolve) => setTimeout(resolve, 50));
          await new Promise((resolve) => setTimeout(resolve, 1500));  // no retry follows
          return seen;
        }"""
    )
    names = [name for name, _ in statuses]
    assert "refused" in names, statuses
    assert names[-1] == "refused" and "reconnecting" not in names, statuses


async def test_without_the_library_file_the_page_works_and_the_feed_says_how_to_build_it(
    offline, server, tenant, alice
):
    page = await offline.context.new_page()
    await page.route("**/assets/vendor/graphql-ws.min.js", lambda route: route.abort())
    await save(alice, "Keeps a paper notebook.")
    await page.goto(server + "/inspector")
    await page.fill("input[name=key]", tenant.key)
    await page.fill("input[name=userId]", "alice")
    await page.click("#sign-in-form button[type=submit]")
    await page.locator("#viewer-user", has_text="alice").wait_for(timeout=20_000)
    await page.locator("#feed-status[data-state=ended]").wait_for(timeout=20_000)
    assert "python web/build.py" in await page.inner_text("#feed-note")
    await page.locator("#memory-list li", has_text="Keeps a paper notebook.").wait_for()


@pytest.fixture(scope="module")
async def policy_server(database_url, embedder) -> AsyncIterator[str]:
    """Grants by user id (tests/policies.py): `reader` reads only; `grant:...` as written."""
    settings = Settings(database_url=database_url, access_policy="tests.policies:by_user")
    async with serving(settings, embedder) as url:
        yield url


async def test_a_reader_is_offered_no_write_button(offline, policy_server, tenant, alice):
    await save(alice.as_user("reader"), "Shares a calendar with the team.")
    page = await offline.context.new_page()
    await sign_in_with_key(page, policy_server, tenant, "reader")
    assert "user read · project read" in await page.inner_text("#viewer-grant")
    card = page.locator("#memory-list li", has_text="Shares a calendar")
    await card.click()
    await page.locator("#history li").first.wait_for()
    assert not await page.is_visible("[role=tab][data-tab=save]")
    assert not await page.is_visible("#retire")
    assert not await page.is_visible("#restore")


async def test_write_buttons_follow_the_grant_of_each_scope(offline, policy_server, tenant, alice):
    user = "grant:user=read-write,project=read"
    mine = alice.as_user(user)
    await save(mine, "Drinks green tea.")
    await save(mine, "The office closes at 18:00.", scope="PROJECT")
    page = await offline.context.new_page()
    await sign_in_with_key(page, policy_server, tenant, user)
    assert await page.is_visible("[role=tab][data-tab=save]")
    await page.click("[role=tab][data-tab=save]")
    options = await page.eval_on_selector_all(
        "#save-form select[name=scope] option", "os => os.filter(o => !o.hidden).map(o => o.value)"
    )
    assert options == ["USER"]
    await page.click("[role=tab][data-tab=memories]")
    for content, writable in (("Drinks green tea.", True), ("The office closes", False)):
        await page.locator("#memory-list li", has_text=content).click()
        await page.locator("#detail-content", has_text=content).wait_for()
        assert await page.is_visible("#retire") is writable
