"""Fetch the browser libraries memql serves from the npm registry and copy them into the package.

GraphiQL (and the React it runs on) and graphql-ws (the inspector's live feed) are not kept in
the repository: `npm ci` installs the
versions pinned by `web/package-lock.json`, and the files the pages load are copied into
`src/memql/http/web/vendor/` (git-ignored), which the wheel and the image carry. setup.py runs
this on every build, editable installs included; run it by hand after changing the lock file:

    python web/build.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

WEB = Path(__file__).resolve().parent
VENDOR = WEB.parent / "src" / "memql" / "http" / "web" / "vendor"

# the file served at /assets/vendor/<name>: its path under node_modules
FILES = {
    "react.production.min.js": "react/umd/react.production.min.js",
    "react-dom.production.min.js": "react-dom/umd/react-dom.production.min.js",
    "graphiql.min.js": "graphiql/graphiql.min.js",
    "graphiql.min.css": "graphiql/graphiql.min.css",
    "plugin-explorer.umd.js": "@graphiql/plugin-explorer/dist/index.umd.js",
    "plugin-explorer.css": "@graphiql/plugin-explorer/dist/style.css",
    # the inspector's live feed (graphql-transport-ws); the UMD build is one file
    "graphql-ws.min.js": "graphql-ws/umd/graphql-ws.min.js",
}
PACKAGES = ("react", "react-dom", "graphiql", "@graphiql/plugin-explorer", "graphql-ws")
MANIFEST = "manifest.json"


def installed(modules: Path) -> bool:
    """node_modules holds the locked version of every package served from it."""
    locked = json.loads((WEB / "package-lock.json").read_text())["packages"]
    for package in PACKAGES:
        manifest = modules / package / "package.json"
        if not manifest.is_file():
            return False
        if (
            json.loads(manifest.read_text())["version"]
            != locked[f"node_modules/{package}"]["version"]
        ):
            return False
    return all((modules / source).is_file() for source in FILES.values())


def build(out: Path = VENDOR) -> None:
    """Install the locked packages when needed and copy the served files to `out`."""
    modules = WEB / "node_modules"
    if not installed(modules):
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(
                "building memql's GraphiQL needs Node.js and npm (the npm registry supplies"
                " GraphiQL and React): install them, or set MEMQL_SKIP_WEB_ASSETS=1 to build"
                " without the explorer"
            )
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=WEB, check=True
        )
    out.mkdir(parents=True, exist_ok=True)
    for name, source in FILES.items():
        shutil.copyfile(modules / source, out / name)
    versions = {
        package: json.loads((modules / package / "package.json").read_text())["version"]
        for package in PACKAGES
    }
    (out / MANIFEST).write_text(json.dumps({"files": sorted(FILES), "versions": versions}) + "\n")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else VENDOR)
    print(f"copied {len(FILES)} files to {VENDOR}")
