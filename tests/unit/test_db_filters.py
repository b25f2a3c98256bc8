"""db.filters: the one SQL filter builder, its conditions read from the filter's fields (no
database: what SQL and parameters a filter becomes)."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime

from psycopg.types.json import Jsonb

from memql.db.filters import CONDITIONS, NOT_CONDITIONS, filter_conditions, where
from memql.db.visibility import LIVE
from memql.model import Kind, Scope
from memql.requests import Criteria, MemoryFilter

SCOPES = (Scope.USER, Scope.PROJECT)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 2, 1, tzinfo=UTC)


def sql_of(flt: MemoryFilter, *, opaque: bool = False) -> tuple[str, dict]:
    conditions, params = filter_conditions(Criteria(SCOPES, flt))
    return where(conditions, opaque=opaque), params


def test_every_field_of_the_filter_is_a_condition_or_the_visibility():
    fields = {f.name for f in dataclasses.fields(MemoryFilter)}
    assert set(CONDITIONS) | set(NOT_CONDITIONS) == fields
    assert not set(CONDITIONS) & set(NOT_CONDITIONS)


def test_each_condition_reads_the_parameter_of_its_own_field_only():
    for name, condition in CONDITIONS.items():
        assert re.findall(r"%\((\w+)\)s", condition.sql) == [name], name


def test_an_empty_filter_keeps_live_memories_only():
    assert sql_of(MemoryFilter()) == (f"({LIVE})", {})


def test_including_invalidated_versions_drops_the_live_condition():
    assert sql_of(MemoryFilter(include_invalidated=True)) == ("true", {})


def test_the_scope_is_left_to_the_visibility_of_each_query():
    assert sql_of(MemoryFilter(scope=Scope.USER)) == sql_of(MemoryFilter())


def test_each_given_field_adds_its_condition_with_its_value_as_the_column_holds_it():
    flt = MemoryFilter(
        kinds=(Kind.EPISODIC, Kind.TOPICAL),
        categories=("work",),
        pinned=False,
        contains="Tea",
        occurred_after=T0,
        occurred_before=T1,
        created_after=T0,
        updated_before=T1,
        source={"tool": "slack"},
    )
    sql, params = sql_of(flt)
    assert sql.startswith(f"({LIVE}) and ")
    for name in ("kinds", "categories", "pinned", "contains", "source"):
        assert f"({CONDITIONS[name].sql})" in sql
    assert "m.occurred_at >= %(occurred_after)s" in sql
    assert "m.occurred_at < %(occurred_before)s" in sql
    assert "m.created_at >= %(created_after)s" in sql
    assert "m.updated_at < %(updated_before)s" in sql
    assert "created_before" not in sql and "updated_after" not in sql
    assert params["kinds"] == ["episodic", "topical"]
    assert params["categories"] == ["work"]
    assert params["pinned"] is False
    assert params["occurred_after"] == T0
    assert isinstance(params["source"], Jsonb) and params["source"].obj == {"tool": "slack"}
    # every placeholder has its parameter, and nothing else is passed
    assert set(re.findall(r"%\((\w+)\)s", sql)) == set(params)


def test_the_opaque_twins_hide_only_the_indexed_conditions_from_the_indexes():
    flt = MemoryFilter(kinds=(Kind.TOPICAL,), contains="tea", occurred_after=T0)
    sql, _ = sql_of(flt, opaque=True)
    assert "(coalesce(m.kind = any(%(kinds)s), false))" in sql
    assert "(strpos(lower(m.content), lower(%(contains)s)) > 0)" in sql
    assert "(m.occurred_at >= %(occurred_after)s)" in sql
    assert f"({LIVE})" in sql
    assert {n for n, c in CONDITIONS.items() if c.indexed} == {"kinds", "categories", "pinned"}
