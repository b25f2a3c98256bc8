"""Every answer carries security headers: pages run only memql's own scripts and styles and
are never framed; nothing is sniffed into a script or a page."""

from __future__ import annotations

import pytest

PAGE_DIRECTIVES = [
    "default-src 'none'",
    "script-src 'self'",
    "connect-src 'self'",
    "frame-ancestors 'none'",
]


@pytest.mark.usefixtures("web_assets")
@pytest.mark.parametrize("path", ["/graphql", "/inspector/"])
async def test_a_page_forbids_framing_foreign_and_inline_code_and_sniffing(http, path):
    page = await http.get(path, headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = [part.strip() for part in page.headers["content-security-policy"].split(";")]
    for directive in PAGE_DIRECTIVES:
        assert directive in policy
    assert not any("unsafe" in part for part in policy)
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in page.text  # every script is a file the policy allows


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/graphql"),
        ("GET", "/healthz"),
        ("GET", "/assets/pages/graphiql.js"),
        ("GET", "/no-such-page"),
        ("POST", "/mcp"),
    ],
)
async def test_every_other_answer_may_run_nothing_and_is_never_sniffed(http, method, path):
    answer = await http.request(method, path, json={"query": "{ __typename }"})
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
