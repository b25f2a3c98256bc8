"""memql: long-term memory for AI agents. `from memql import Client` for the Python client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memql.client import AsyncClient, Client, MemoryInput, MemqlClientError

__all__ = ["AsyncClient", "Client", "MemoryInput", "MemqlClientError"]


def __getattr__(name: str) -> Any:
    # lazy, so the server's modules do not load the client's HTTP and websocket libraries
    if name in __all__:
        from memql import client

        return getattr(client, name)
    raise AttributeError(f"module 'memql' has no attribute {name!r}")
