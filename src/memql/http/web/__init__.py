"""What memql serves to browsers, all from the installed package (no internet needed).

- GraphiQL on `GET /graphql`: the page is `graphiql.html`; React, GraphiQL and its explorer
  plugin are copied from the npm registry into `vendor/` when the package is built
  (`web/build.py`, run by setup.py) and served under `/assets/vendor/`.
- GraphiQL's settings and welcome text are `pages/graphiql.js` (and `.css`), under
  `/assets/pages/`: the page has no inline script or style, which its policy forbids
  (`headers.py`).
- The inspector at `/inspector/`: plain HTML, CSS and ES modules in `inspector/`, written here
  and served as they are (no build step); it talks to `/graphql` like any browser app, its live
  feed through the graphql-ws library (`vendor/graphql-ws.min.js`, from npm like GraphiQL's).
- `GET /`: links to the rest (`home.html`), or the same as JSON when asked for JSON.
"""

from __future__ import annotations

import html
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

HERE = Path(__file__).parent
VENDOR = HERE / "vendor"
PAGES = HERE / "pages"
INSPECTOR = HERE / "inspector"

MISSING_ASSETS = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>memql · GraphiQL is not built</title></head>
<body style="font: 16px/1.5 system-ui, sans-serif; max-width: 44rem; margin: 3rem auto">
<h1>GraphiQL's files are not built</h1>
<p>memql serves GraphiQL from files it carries, so the explorer works with no internet. They
were not found in <code>{vendor}</code>: this installation was built without Node.js and npm
(or with <code>MEMQL_SKIP_WEB_ASSETS=1</code>).</p>
<p>To add them, install Node.js and npm, then from the source checkout run
<code>python web/build.py</code> (or reinstall: <code>pip install -e '.[local,dev]'</code>), and
reload this page. The API itself works without them: POST your queries to this URL.</p>
</body></html>
"""


def assets_built() -> bool:
    return (VENDOR / "manifest.json").is_file()


def graphiql_html() -> str:
    """The explorer page, or a page saying how to build its files when they are missing."""
    if not assets_built():
        return MISSING_ASSETS.format(vendor=html.escape(str(VENDOR)))
    return (HERE / "graphiql.html").read_text(encoding="utf-8")


# what `GET /` links to, for a client that asks for JSON
LINKS = {
    "graphql": "/graphql",
    "inspector": "/inspector/",
    "healthz": "/healthz",
    "readyz": "/readyz",
    "mcp": "/mcp",
}


def wants_json(request: Request) -> bool:
    """The client asked for JSON and not for a page (a browser's Accept names text/html)."""
    accept = request.headers.get("accept", "")
    return "json" in accept and "text/html" not in accept


async def home(request: Request) -> Response:
    """Where to go from the root: a page of links, or the links as JSON."""
    if wants_json(request):
        return JSONResponse({"service": "memql", "links": LINKS})
    return HTMLResponse((HERE / "home.html").read_text(encoding="utf-8"))


async def to_inspector(request: Request) -> Response:
    # the page's modules are relative to /inspector/
    return RedirectResponse("/inspector/", status_code=308)


def routes() -> list[BaseRoute]:
    return [
        Route("/", home),
        Mount("/assets/vendor", StaticFiles(directory=VENDOR, check_dir=False), name="vendor"),
        # the pages' own scripts and styles: no inline code, so the pages' policy allows none
        Mount("/assets/pages", StaticFiles(directory=PAGES), name="pages"),
        Route("/inspector", to_inspector),
        Mount("/inspector", StaticFiles(directory=INSPECTOR, html=True), name="inspector"),
    ]
