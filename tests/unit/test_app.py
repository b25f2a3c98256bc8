"""`memql.app`: building the app opens nothing and loads only what its routes need at once.
The MCP endpoint, and with it the MCP SDK (1-2 s of imports), loads when the server starts
(tests/api/test_mcp*.py reach it through a started server)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "memql"


def path_of(module: str) -> Path | None:
    parts = module.split(".")[1:]
    for candidate in (
        PACKAGE.joinpath(*parts, "__init__.py"),
        PACKAGE.joinpath(*parts).with_suffix(".py"),
    ):
        if candidate.is_file():
            return candidate
    return None


def loaded_at_import(module: str, path: Path) -> set[str]:
    """What importing `module` imports: its module-level statements (not `if TYPE_CHECKING:`
    nor a function's body), each `from a.b import c` as `a.b` and, when it is one, `a.b.c`."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                base = ".".join([package.rsplit(".", node.level - 1)[0], base]).rstrip(".")
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    # importing a.b.c imports a and a.b first
    return {".".join(n.split(".")[: i + 1]) for n in names for i in range(n.count(".") + 1)}


def imported_by(module: str) -> set[str]:
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        path = path_of(name) if name.split(".")[0] == "memql" else None
        if name in seen or (name.startswith("memql") and path is None):
            continue
        seen.add(name)
        if path is not None:
            todo.extend(loaded_at_import(name, path))
    return seen


def test_building_the_app_does_not_load_the_mcp_sdk():
    loaded = imported_by("memql.app")
    assert {"memql.mcp", "memql.graphql.schema", "strawberry"} <= loaded  # the walk reached them
    assert "memql.mcp.server" not in loaded
    assert [m for m in loaded if m.split(".")[0] in {"mcp", "mcp_types"}] == []
