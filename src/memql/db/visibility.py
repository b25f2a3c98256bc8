"""Who sees which memory, as SQL every query of memories is built from: the rows a principal
may see (filtered by project and owner here, whatever the caller passed), the live ones, one
branch per owner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memql.db.rows import MEMORY_COLUMNS
from memql.model import Principal, Scope

# The rows a principal may see in the scopes it asks for: its own user scope and the shared
# project scope. Written as an OR of index-friendly branches.
VISIBLE = """
    m.project_id = %(project_id)s and (
        (m.scope = 'user' and m.owner_id = %(user_id)s and 'user' = any(%(scopes)s))
        or (m.scope = 'project' and m.owner_id = '' and 'project' = any(%(scopes)s))
    )
"""

LIVE = "m.invalidated_at is null and (m.expires_at is null or m.expires_at > now())"

# The two owners a principal reads, each a branch the owner indexes serve on its own
OWN = "m.project_id = %(project_id)s and m.scope = 'user' and m.owner_id = %(user_id)s"
SHARED = "m.project_id = %(project_id)s and m.scope = 'project' and m.owner_id = ''"


def first_per_owner(conditions: str, order: str, columns: str = MEMORY_COLUMNS) -> str:
    """The first `%(limit)s` visible rows in `order` that meet `conditions`, taken from each
    owner separately and merged: an index on (owner, order) reads `limit` rows of each, never
    a whole shared scope that a plain `VISIBLE` (an OR) would sort in full. `columns` must
    hold those `order` names."""
    branches = [
        f"""
        (select {columns} from memories m
         where '{scope}' = any(%(scopes)s) and {owner} and ({conditions})
         order by {order} limit %(limit)s)
        """
        for scope, owner in (("user", OWN), ("project", SHARED))
    ]
    return f"""
        select {columns} from ({" union all ".join(branches)}) m
        order by {order} limit %(limit)s
    """


def visibility(principal: Principal, scopes: Sequence[Scope]) -> dict[str, Any]:
    return {
        "project_id": principal.project_id,
        "user_id": principal.user_id,
        "scopes": [s.value for s in scopes],
    }
