"""Headless Chromium (Debian's `chromium`, driven by Playwright) as an offline machine sees the web.

Every host but 127.0.0.1 resolves to nothing, and every request to anywhere but loopback is
aborted and recorded, so a page that needs the internet fails here as it would air-gapped.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Route

# an init script recording every Content-Security-Policy violation a page meets, as the browser
# reports it, in `window.violations`
WATCH_POLICY = """
window.violations = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.violations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""

OFFLINE_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]


def chromium_path() -> str:
    path = os.environ.get("MEMQL_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail("the browser tests need Chromium: `apt-get install chromium` (Debian)")
    return path


@pytest.fixture(scope="session")
async def chromium() -> AsyncIterator[Browser]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium_path(), args=OFFLINE_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            await browser.close()


@dataclass
class OfflineContext:
    context: BrowserContext
    # every request the page tried to make beyond loopback (all were refused)
    blocked: list[str] = field(default_factory=list)


@pytest.fixture
async def offline(chromium: Browser) -> AsyncIterator[OfflineContext]:
    """A fresh browser profile whose requests may reach 127.0.0.1 only."""
    context = await chromium.new_context(viewport={"width": 1280, "height": 860})
    state = OfflineContext(context)

    async def guard(route: Route) -> None:
        url = route.request.url
        if urlsplit(url).hostname == "127.0.0.1" or url.startswith(("data:", "blob:")):
            await route.continue_()
        else:
            state.blocked.append(url)
            await route.abort("internetdisconnected")

    await context.route("**/*", guard)
    try:
        yield state
    finally:
        await context.close()


@contextmanager
def static_site(html: str) -> Iterator[str]:
    """A second web origin on loopback serving `html` at every path; yields the origin."""
    body = html.encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
