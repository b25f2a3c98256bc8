"""Automatic persisted queries (Apollo's APQ protocol).

A client sends `extensions.persistedQuery = {version: 1, sha256Hash}` without the query; when
this instance knows the hash it runs the query it stands for, otherwise it answers
`PERSISTED_QUERY_NOT_FOUND` and the client sends the query with its hash, which is then kept.
Each instance keeps its own bounded store (least recently used out first): a miss only costs
one round trip, so instances need not share it.

The store is per project, and only a request with valid credentials adds to it: a hash finds
only queries its own project registered (a hash-only request cannot confirm another tenant's
query text), and neither a caller without credentials nor another tenant can fill or evict a
project's queries. Each project keeps at most `capacity` queries and `max_chars` characters.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

from graphql import GraphQLError

from memql.errors import BadInput

NOT_FOUND = "PERSISTED_QUERY_NOT_FOUND"
NOT_SUPPORTED = "PERSISTED_QUERY_NOT_SUPPORTED"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def requested_hash(extensions: Mapping[str, Any] | None) -> str | None:
    """The hash of a persisted query the request names, or None; BadInput when malformed."""
    persisted = (extensions or {}).get("persistedQuery")
    if persisted is None:
        return None
    if not isinstance(persisted, Mapping) or persisted.get("version") != 1:
        raise BadInput("`extensions.persistedQuery` must be {version: 1, sha256Hash}")
    digest = persisted.get("sha256Hash")
    if not isinstance(digest, str) or not _SHA256.match(digest.lower()):
        raise BadInput("`extensions.persistedQuery.sha256Hash` must be 64 hex digits")
    return digest.lower()


def digest(query: str) -> str:
    return hashlib.sha256(query.encode()).hexdigest()


def not_found() -> GraphQLError:
    # the message is the protocol's own: some clients match on it rather than on the code
    return GraphQLError("PersistedQueryNotFound", extensions={"code": NOT_FOUND})


def not_supported() -> GraphQLError:
    return GraphQLError("PersistedQueryNotSupported", extensions={"code": NOT_SUPPORTED})


class _Queries:
    """One project's queries, least recently used first."""

    def __init__(self) -> None:
        self.queries: OrderedDict[str, str] = OrderedDict()
        self.chars = 0


class PersistedQueries:
    """Per project, at most `capacity` queries by hash and `max_chars` characters of them in
    all, least recently used out first (comments make a query long without making it costly
    to run, so the count alone would not bound the memory)."""

    def __init__(self, capacity: int, max_chars: int = 2_000_000) -> None:
        self.capacity = capacity
        self.max_chars = max_chars
        self._projects: dict[Hashable, _Queries] = {}

    def get(self, project: Hashable, sha256: str) -> str | None:
        kept = self._projects.get(project)
        query = kept.queries.get(sha256) if kept is not None else None
        if query is not None and kept is not None:
            kept.queries.move_to_end(sha256)
        return query

    def put(self, project: Hashable, sha256: str, query: str) -> None:
        if len(query) > self.max_chars:
            return
        kept = self._projects.setdefault(project, _Queries())
        previous = kept.queries.pop(sha256, None)
        if previous is not None:
            kept.chars -= len(previous)
        kept.queries[sha256] = query
        kept.chars += len(query)
        while len(kept.queries) > self.capacity or kept.chars > self.max_chars:
            _, evicted = kept.queries.popitem(last=False)
            kept.chars -= len(evicted)

    def __len__(self) -> int:
        return sum(len(kept.queries) for kept in self._projects.values())

    def chars(self) -> int:
        return sum(kept.chars for kept in self._projects.values())
