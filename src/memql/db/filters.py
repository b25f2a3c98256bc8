"""The SQL of a read's filter: one list of conditions that lists, counts, recall and the context
block all read (`filter_conditions`), one line per field of `MemoryFilter`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from memql.db.rows import column_value
from memql.db.visibility import LIVE
from memql.requests import Criteria


@dataclass(frozen=True)
class Condition:
    """One condition on the rows of `memories m`, its value the parameter named as its field."""

    sql: str
    # an index on (owner, this column) serves it: a recall counts the shared rows it keeps and
    # scores them all when they are few, and is planned for its values each time
    indexed: bool = False

    @property
    def opaque(self) -> str:
        """The same condition, written so that no index serves it and the planner assumes it
        keeps half the rows (recall's HNSW route must not be turned by its estimate into a sort
        of every match)."""
        return f"coalesce({self.sql}, false)" if self.indexed else self.sql


# what each field of `MemoryFilter` asks of a row, when it is given (`scope` is the visibility
# of every query, `include_invalidated` the absence of `LIVE`)
CONDITIONS: dict[str, Condition] = {
    "kinds": Condition("m.kind = any(%(kinds)s)", indexed=True),
    "categories": Condition("m.category = any(%(categories)s)", indexed=True),
    "pinned": Condition("m.pinned = %(pinned)s", indexed=True),
    "contains": Condition("strpos(lower(m.content), lower(%(contains)s)) > 0"),
    "occurred_after": Condition("m.occurred_at >= %(occurred_after)s"),
    "occurred_before": Condition("m.occurred_at < %(occurred_before)s"),
    "created_after": Condition("m.created_at >= %(created_after)s"),
    "created_before": Condition("m.created_at < %(created_before)s"),
    "updated_after": Condition("m.updated_at >= %(updated_after)s"),
    "updated_before": Condition("m.updated_at < %(updated_before)s"),
    "source": Condition("m.source @> %(source)s"),
}
# the fields of the filter that are not conditions of their own
NOT_CONDITIONS = ("scope", "include_invalidated")


def _param(value: Any) -> Any:
    if isinstance(value, tuple):
        return [column_value(v) for v in value]
    return column_value(value)


def filter_conditions(criteria: Criteria) -> tuple[list[Condition], dict[str, Any]]:
    """The conditions (ANDed) and parameters of a read's filter, visibility aside: `LIVE`
    unless it includes invalidated versions, then one per field given."""
    flt = criteria.filter
    conditions = [] if flt.include_invalidated else [Condition(LIVE)]
    params: dict[str, Any] = {}
    for f in dataclasses.fields(flt):
        value = getattr(flt, f.name)
        if f.name in NOT_CONDITIONS or value is None:
            continue
        conditions.append(CONDITIONS[f.name])
        params[f.name] = _param(value)
    return conditions, params


def where(conditions: list[Condition], *, opaque: bool = False) -> str:
    """The conditions as one SQL expression (`true` for none)."""
    return " and ".join(f"({c.opaque if opaque else c.sql})" for c in conditions) or "true"
