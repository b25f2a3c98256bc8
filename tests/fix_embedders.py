"""The embedders of the suite's two worlds: the deterministic `HashEmbedder` (every test whose
point is not meaning) and the real local model (test modules marked `model`), and the rule
that a whole module is in one world or the other.

memql is imported inside the fixtures, so loading this plugin costs `tests/unit` nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from memql.embeddings import Embedder
    from memql.embeddings.local import LocalEmbedder
    from memql.testing import HashEmbedder


def uses_model(request: pytest.FixtureRequest) -> bool:
    """Whether the module (or class) asking is marked `model`."""
    return request.node.get_closest_marker("model") is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # the world is chosen per module (its servers are shared by the module's tests): a single
    # test marked `model` in a module that is not would silently run without the model
    for item in items:
        module = item.getparent(pytest.Module)
        if item.get_closest_marker("model") and not (module and module.get_closest_marker("model")):
            raise pytest.UsageError(
                f"{item.nodeid}: mark the whole module `model` (pytestmark), not one test"
            )


@pytest.fixture(scope="session")
def hash_embedder() -> HashEmbedder:
    from memql.testing import HashEmbedder

    return HashEmbedder()


@pytest.fixture(scope="session")
async def local_model() -> AsyncIterator[LocalEmbedder]:
    """The real all-MiniLM-L6-v2, loaded once for every test that needs it."""
    from memql.embeddings.local import LocalEmbedder

    model = await LocalEmbedder.load()
    yield model
    await model.close()


@pytest.fixture(scope="module")
def embedder(request: pytest.FixtureRequest) -> Embedder:
    """The embedder of the module's world."""
    found: Embedder = request.getfixturevalue(
        "local_model" if uses_model(request) else "hash_embedder"
    )
    return found
