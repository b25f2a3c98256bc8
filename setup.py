"""The build step pyproject.toml cannot express: GraphiQL's files from the npm registry.

Every build (wheel, sdist-to-wheel, editable install) runs web/build.py before collecting the
package data, so the installed package serves GraphiQL with no internet. Node.js and npm are
build requirements; MEMQL_SKIP_WEB_ASSETS=1 builds without them (GraphiQL then explains
how to add its files).
"""

import os
import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithWebAssets(build_py):
    def run(self) -> None:
        if os.environ.get("MEMQL_SKIP_WEB_ASSETS") != "1":
            web = runpy.run_path(str(HERE / "web" / "build.py"))
            web["build"]()  # into src/memql/http/web/vendor (what an editable install serves)
            if not self.editable_mode:
                web["build"](Path(self.build_lib) / "memql" / "http" / "web" / "vendor")
        super().run()


setup(cmdclass={"build_py": BuildWithWebAssets})
