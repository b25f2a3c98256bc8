"""`db/recall.py` builds one statement per set of scopes; an unfiltered one is prepared and runs
on every recall, so it stays within the length psycopg keeps parsed (longer, its placeholders
are converted again on every call: about 0.2-0.4 ms each here)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import numpy as np
import pytest
from psycopg import _queries

from memql.db import recall
from memql.model import Access, Consumer, Grant, Kind, Principal, Scope
from memql.requests import Criteria, MemoryFilter
from memql.service import DEFAULT_WEIGHTS

PRINCIPAL = Principal(
    uuid.uuid4(), "p", "alice", Consumer.AGENT, Grant(Access.READ_WRITE, Access.READ_WRITE)
)
SCOPES = [(Scope.USER,), (Scope.PROJECT,), (Scope.USER, Scope.PROJECT)]


class Statement:
    """Stands where a connection would, keeping what recall sends instead of sending it."""

    def __init__(self) -> None:
        self.sql = ""
        self.prepare: bool | None = None

    def cursor(self, row_factory: Any = None) -> Statement:
        return self

    async def execute(self, sql: str, params: Any, prepare: bool | None = None) -> None:
        self.sql, self.prepare = sql, prepare


def statement(scopes: tuple[Scope, ...], memory_filter: MemoryFilter) -> Statement:
    sent = Statement()
    asyncio.run(
        recall.recall(
            sent,  # type: ignore[arg-type]
            PRINCIPAL,
            query="what does alice drink",
            embedding=np.zeros(384, dtype=np.float32),
            model="m",
            criteria=Criteria(scopes=scopes, filter=memory_filter),
            weights=DEFAULT_WEIGHTS,
            limit=5,
        )
    )
    return sent


@pytest.mark.parametrize("scopes", SCOPES, ids=lambda s: "+".join(x.value for x in s))
def test_an_unfiltered_recall_is_prepared_and_short_enough_to_stay_parsed(scopes):
    sent = statement(scopes, MemoryFilter())
    assert sent.prepare is None  # psycopg's default: prepared from its fifth run
    assert len(sent.sql.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH, len(sent.sql)


@pytest.mark.parametrize("scopes", SCOPES, ids=lambda s: "+".join(x.value for x in s))
def test_a_filtered_recall_is_planned_for_its_values(scopes):
    sent = statement(scopes, MemoryFilter(kinds=(Kind.TOPICAL,)))
    assert sent.prepare is False
    # only a filter writes the few-rows routes and the count that picks one
    assert ("filtered as" in sent.sql) == (Scope.PROJECT in scopes)
    assert "filtered as" not in statement(scopes, MemoryFilter()).sql
