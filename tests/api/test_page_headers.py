"""Every answer carries security headers: pages run only memql's own scripts and styles and
are never framed; nothing is sniffed into a script or a page."""

from __future__ import annotations

import re

import pytest

PAGE_DIRECTIVES = [
    "default-src 'none'",
    "script-src 'self'",
    "connect-src 'self'",
    "frame-ancestors 'none'",
]


@pytest.mark.usefixtures("web_assets")
@pytest.mark.parametrize("path", ["/", "/graphql", "/inspector/"])
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


@pytest.mark.usefixtures("web_assets")
async def test_the_root_is_a_page_of_links_each_of_which_answers(http):
    page = await http.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    links = re.findall(r'href="(/[^"]*)"', page.text)
    for path in ("/graphql", "/inspector/", "/healthz", "/readyz", "/assets/pages/home.css"):
        assert path in links
    for path in links:
        answer = await http.get(path, headers={"Accept": "text/html"})
        assert answer.status_code == 200, path


async def test_the_root_answers_its_links_as_json_to_a_client_that_asks_for_json(http):
    answer = await http.get("/", headers={"Accept": "application/json"})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
    assert answer.json() == {
        "service": "memql",
        "links": {
            "graphql": "/graphql",
            "inspector": "/inspector/",
            "healthz": "/healthz",
            "readyz": "/readyz",
            "mcp": "/mcp",
        },
    }
    assert (await http.post("/", json={})).status_code == 405
