"""The SQL of memories: writes, lists and counts (their columns and rows are `rows.py`'s; who
sees which, every query filtered by project and owner whatever the caller passed, is
`visibility.py`'s).

Functions take a connection that the caller has put in a transaction, so the service decides what
is atomic.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from psycopg.rows import dict_row

from memql.db.filters import filter_conditions
from memql.db.pool import Conn
from memql.db.rows import MEMORY_COLUMNS, column_value, memory_from_row
from memql.db.visibility import LIVE, OWN, SHARED, VISIBLE, first_per_owner, visibility
from memql.embeddings import Vector
from memql.model import (
    ContextItem,
    InvalidationReason,
    Kind,
    Memory,
    NearDuplicate,
    Order,
    Principal,
    Scope,
    SortDirection,
)
from memql.requests import NEW_MEMORY_FIELDS, Criteria, NewMemory
from memql.rules.pagination import Window

# what a context block shows of a memory, and what it is ordered by
CONTEXT_COLUMNS = "m.kind, m.content, m.category, m.pinned, m.occurred_at, m.created_at, m.id"


async def _fetch_memories(conn: Conn, sql: str, params: dict[str, Any]) -> list[Memory]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return [memory_from_row(r) for r in await cur.fetchall()]


async def _fetch_memory(conn: Conn, sql: str, params: dict[str, Any]) -> Memory | None:
    rows = await _fetch_memories(conn, sql, params)
    return rows[0] if rows else None


# --- writes -------------------------------------------------------------------------------


async def lock_owner(conn: Conn, project_id: uuid.UUID, scope: Scope, owner_id: str) -> None:
    """Serialise writes to one owner's memories until the transaction ends.

    Near-duplicate detection and key supersession read then write; under this lock concurrent
    saves for one owner see each other's committed rows, so exactly one live row results.
    """
    await conn.execute(
        "select pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (f"memql:{project_id}:{scope.value}:{owner_id}",),
    )


# the fields a save gives are stored as given; the scope is decided by the caller
_NEW_MEMORY_COLUMNS = [name for name in NEW_MEMORY_FIELDS if name != "scope"]
INSERT = f"""
    insert into memories as m (
        id, project_id, scope, owner_id, created_by, created_at, updated_at, supersedes,
        embedding_model, embedding, {", ".join(_NEW_MEMORY_COLUMNS)})
    values (
        %(id)s, %(project_id)s, %(scope)s, %(owner_id)s, %(created_by)s, clock_timestamp(),
        clock_timestamp(), %(supersedes)s, %(model)s, %(embedding)s,
        {", ".join(f"%({name})s" for name in _NEW_MEMORY_COLUMNS)})
    returning {MEMORY_COLUMNS}
"""


def _insert_params(
    principal: Principal,
    new: NewMemory,
    scope: Scope,
    embedding: Vector,
    model: str,
    memory_id: uuid.UUID | None,
    supersedes: uuid.UUID | None,
) -> dict[str, Any]:
    return {
        "id": memory_id or uuid.uuid4(),
        "project_id": principal.project_id,
        "scope": scope.value,
        "owner_id": principal.owner_for(scope),
        "created_by": principal.user_id,
        "supersedes": supersedes,
        "model": model,
        "embedding": embedding,
        **{name: column_value(getattr(new, name)) for name in _NEW_MEMORY_COLUMNS},
    }


async def insert_memory(
    conn: Conn,
    principal: Principal,
    new: NewMemory,
    *,
    scope: Scope,
    embedding: Vector,
    model: str,
    memory_id: uuid.UUID | None = None,
    supersedes: uuid.UUID | None = None,
) -> Memory:
    params = _insert_params(principal, new, scope, embedding, model, memory_id, supersedes)
    memory = await _fetch_memory(conn, INSERT, params)
    assert memory is not None
    return memory


async def insert_memories(
    conn: Conn,
    principal: Principal,
    news: Sequence[NewMemory],
    *,
    embeddings: Sequence[Vector],
    model: str,
) -> list[Memory]:
    """Insert new memories (each in its own scope, user when unset) in one round trip
    (psycopg pipelines `executemany`); the rows in order."""
    params = [
        _insert_params(principal, new, new.scope or Scope.USER, vector, model, None, None)
        for new, vector in zip(news, embeddings, strict=True)
    ]
    memories: list[Memory] = []
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.executemany(INSERT, params, returning=True)
        while True:
            row = await cur.fetchone()
            assert row is not None
            memories.append(memory_from_row(row))
            if not cur.nextset():
                break
    return memories


# An update's time is the statement's (`statement_timestamp()`, stable), not the clock's at
# the row (`clock_timestamp()`, volatile, which Citus refuses in an UPDATE of a distributed
# table): each update here changes one row, in a statement of its own.
#
# one memory, by its key (project_id, id): with the project, a write on Citus goes to the one
# shard that holds the row (a write to every shard would commit in two phases)
_THE_MEMORY = "m.project_id = %(project_id)s and m.id = %(id)s"


def _the(memory: Memory) -> dict[str, Any]:
    return {"project_id": memory.project_id, "id": memory.id}


async def absorb(
    conn: Conn, memory: Memory, source_thread_ids: Sequence[str], pinned: bool
) -> Memory:
    """Fold a near-duplicate save into `memory`: new thread ids, a pin kept, updated_at now."""
    sql = f"""
        update memories as m set
            source_thread_ids = %(ids)s,
            pinned = m.pinned or %(pinned)s,
            updated_at = statement_timestamp()
        where {_THE_MEMORY}
        returning {MEMORY_COLUMNS}
    """
    absorbed = await _fetch_memory(
        conn, sql, {**_the(memory), "ids": list(source_thread_ids), "pinned": pinned}
    )
    assert absorbed is not None
    return absorbed


async def invalidate(
    conn: Conn,
    memory: Memory,
    reason: InvalidationReason,
    *,
    superseded_by: uuid.UUID | None = None,
    at_expiry: bool = False,
) -> Memory:
    sql = f"""
        update memories as m set
            invalidated_at = {"m.expires_at" if at_expiry else "statement_timestamp()"},
            invalidation_reason = %(reason)s,
            superseded_by = coalesce(%(superseded_by)s, m.superseded_by)
        where {_THE_MEMORY}
        returning {MEMORY_COLUMNS}
    """
    invalidated = await _fetch_memory(
        conn,
        sql,
        {
            **_the(memory),
            "reason": str(reason),
            "superseded_by": superseded_by,
        },
    )
    assert invalidated is not None
    return invalidated


async def reinstate(conn: Conn, memory: Memory) -> Memory:
    sql = f"""
        update memories as m set invalidated_at = null, invalidation_reason = null,
            updated_at = statement_timestamp()
        where {_THE_MEMORY}
        returning {MEMORY_COLUMNS}
    """
    reinstated = await _fetch_memory(conn, sql, _the(memory))
    assert reinstated is not None
    return reinstated


async def erase_chain(conn: Conn, principal: Principal, memory: Memory) -> list[uuid.UUID]:
    """Hard-delete every version of `memory` and the events that carry their content."""
    ids = [m.id for m in await history(conn, principal, memory.id, [memory.scope])]
    params = (principal.project_id, ids)
    await conn.execute(
        "delete from memory_events where project_id = %s and memory_id = any(%s)", params
    )
    await conn.execute("delete from memories where project_id = %s and id = any(%s)", params)
    return ids


async def erase_owner(conn: Conn, principal: Principal, scope: Scope) -> int:
    """Hard-delete every memory and event of the principal's owner in `scope`."""
    params = (principal.project_id, scope.value, principal.owner_for(scope))
    await conn.execute(
        "delete from memory_events where project_id = %s and scope = %s and owner_id = %s", params
    )
    cur = await conn.execute(
        "delete from memories where project_id = %s and scope = %s and owner_id = %s", params
    )
    return cur.rowcount


# --- reads --------------------------------------------------------------------------------


async def get(
    conn: Conn, principal: Principal, memory_id: uuid.UUID, scopes: Sequence[Scope]
) -> Memory | None:
    sql = f"select {MEMORY_COLUMNS} from memories m where m.id = %(id)s and {VISIBLE}"
    return await _fetch_memory(conn, sql, {"id": memory_id, **visibility(principal, scopes)})


async def get_live_by_key(
    conn: Conn, principal: Principal, scope: Scope, key: str
) -> Memory | None:
    """The memory holding `key` (not retired or superseded; it may have expired)."""
    sql = f"""
        select {MEMORY_COLUMNS} from memories m
        where m.key = %(key)s and m.invalidated_at is null and {VISIBLE}
    """
    return await _fetch_memory(conn, sql, {"key": key, **visibility(principal, [scope])})


async def history(
    conn: Conn, principal: Principal, memory_id: uuid.UUID, scopes: Sequence[Scope]
) -> list[Memory]:
    """Every version in the chain of `memory_id`, oldest first; empty when it is not visible."""
    sql = f"""
        with recursive
        back(id, supersedes) as (
            select m.id, m.supersedes from memories m where m.id = %(id)s and {VISIBLE}
            union all
            select p.id, p.supersedes from memories p join back b on p.id = b.supersedes
            where p.project_id = %(project_id)s
        ),
        fwd(id, superseded_by) as (
            select m.id, m.superseded_by from memories m where m.id = %(id)s and {VISIBLE}
            union all
            select n.id, n.superseded_by from memories n join fwd f on n.id = f.superseded_by
            where n.project_id = %(project_id)s
        )
        select {MEMORY_COLUMNS} from memories m
        where m.id in (select id from back union select id from fwd) and {VISIBLE}
        order by m.created_at, m.id
    """
    return await _fetch_memories(conn, sql, {"id": memory_id, **visibility(principal, scopes)})


# what a save's transaction sets for its near-duplicate search of a shared scope (see
# near_duplicates): an iterative scan, so the nearest rows of this project come back however
# many rows of other projects lie nearer, within a bound
NEAR_DUPLICATE_SETTINGS = (
    ("hnsw.iterative_scan", "relaxed_order"),
    ("hnsw.max_scan_tuples", "50000"),
)


async def near_duplicates(
    conn: Conn,
    principal: Principal,
    scope: Scope,
    embedding: Vector,
    model: str,
    *,
    threshold: float,
    limit: int = 5,
    exclude: Sequence[uuid.UUID] = (),
) -> list[NearDuplicate]:
    """Live memories of the same owner and scope whose cosine similarity is >= `threshold`:
    the `limit` nearest, kept if they are that similar. A user's memories are all compared
    (exact). A shared scope may hold any number: its nearest come from the HNSW index, whose
    iterative scan (`NEAR_DUPLICATE_SETTINGS`, set by the caller's transaction) skips other
    projects' rows and rejected ones; a near-duplicate is among the very nearest, which the
    graph finds."""
    dims = int(embedding.shape[0])
    if scope is Scope.USER:
        nearest = f"""
            select m.* from memories m
            where {OWN} and {LIVE} and m.embedding_model = %(model)s
              and not (m.id = any(%(exclude)s))
            order by m.embedding <=> %(embedding)s, m.created_at
            limit %(limit)s"""
    else:
        nearest = f"""
            select m.* from memories m
            where {SHARED} and {LIVE} and m.embedding_model = %(model)s
              and not (m.id = any(%(exclude)s)) and vector_dims(m.embedding) = {dims}
            order by (m.embedding::vector({dims})) <=> %(embedding)s
            limit %(limit)s"""
    sql = f"""
        select {MEMORY_COLUMNS}, 1 - (m.embedding <=> %(embedding)s) as similarity
        from ({nearest}) m
        where 1 - (m.embedding <=> %(embedding)s) >= %(threshold)s
        order by m.embedding <=> %(embedding)s, m.created_at
    """
    params = {
        **visibility(principal, [scope]),
        "embedding": embedding,
        "model": model,
        "threshold": threshold,
        "limit": limit,
        "exclude": list(exclude),
    }
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return [
            NearDuplicate(memory_from_row(r), min(1.0, float(r["similarity"])))
            for r in await cur.fetchall()
        ]


async def near_duplicates_of_each(
    conn: Conn,
    principal: Principal,
    scope: Scope,
    embeddings: Sequence[Vector],
    model: str,
    *,
    threshold: float,
    limit: int,
) -> list[list[NearDuplicate]]:
    """`near_duplicates` of every vector of `embeddings` among the stored memories of one owner,
    in one statement; a list per vector, in order."""
    if not embeddings:
        return []
    dims = int(embeddings[0].shape[0])
    if scope is Scope.USER:
        # the owner's rows are read once and every input compared with them (a scan of the
        # owner's rows per input fetched each row again for every input: 100 inputs against
        # 900 memories read 90,000 rows); only the nearest are then read whole
        sql = f"""
            with own as materialized (
                select m.id, m.embedding, m.created_at from memories m
                where {OWN} and {LIVE} and m.embedding_model = %(model)s
            )
            select v.i, {MEMORY_COLUMNS}, 1 - n.distance as similarity
            from unnest(%(embeddings)b::vector[]) with ordinality v(e, i),
                lateral (select o.id, o.embedding <=> v.e as distance, o.created_at from own o
                         order by distance, o.created_at
                         limit %(limit)s) n
                join memories m on m.id = n.id
            where 1 - n.distance >= %(threshold)s
            order by v.i, n.distance, n.created_at
        """
    else:
        sql = f"""
            select v.i, {MEMORY_COLUMNS}, 1 - (m.embedding <=> v.e) as similarity
            from unnest(%(embeddings)b::vector[]) with ordinality v(e, i),
                lateral (select m.* from memories m
                         where {SHARED} and {LIVE} and m.embedding_model = %(model)s
                           and vector_dims(m.embedding) = {dims}
                         order by (m.embedding::vector({dims})) <=> v.e
                         limit %(limit)s) m
            where 1 - (m.embedding <=> v.e) >= %(threshold)s
            order by v.i, m.embedding <=> v.e, m.created_at
        """
    params = {
        **visibility(principal, [scope]),
        "embeddings": list(embeddings),
        "model": model,
        "threshold": threshold,
        "limit": limit,
    }
    found: list[list[NearDuplicate]] = [[] for _ in embeddings]
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        for r in await cur.fetchall():
            found[int(r["i"]) - 1].append(
                NearDuplicate(memory_from_row(r), min(1.0, float(r["similarity"])))
            )
    return found


def _conditions(principal: Principal, criteria: Criteria) -> tuple[list[str], dict[str, Any]]:
    """The WHERE conditions (ANDed) and parameters of a read's filter, visibility aside (the
    page query takes each owner's rows separately; other queries add `VISIBLE`)."""
    conditions, params = filter_conditions(criteria)
    return [c.sql for c in conditions], {**visibility(principal, criteria.scopes), **params}


def _beyond(order: Order, name: str, *, forward: bool) -> str:
    """The condition that a row comes after (`forward`) or before the position `name` in
    `order`: a row comparison on (sort key, id), so a B-tree on them serves it."""
    column = order.field.value
    descending = order.direction is SortDirection.DESC
    op = "<" if descending == forward else ">"
    return f"(m.{column}, m.id) {op} (%({name}_at)s, %({name}_id)s)"


async def list_page(
    conn: Conn, principal: Principal, criteria: Criteria, window: Window
) -> tuple[list[Memory], bool, bool]:
    """A keyset page of the list in the window's order between its cursors: its first `size`
    memories, or its last `size` when read from the end (still returned in order).

    Also says whether more memories lie beyond the page in the direction read, and whether any
    lie on the other side of the cursor it started from (`after`, or `before` from the end).
    """
    order, from_end = window.order, window.from_end
    conditions, params = _conditions(principal, criteria)
    bounded = list(conditions)
    for name, position, forward in (
        ("after", window.after, True),
        ("before", window.before, False),
    ):
        if position is not None:
            bounded.append(_beyond(order, name, forward=forward))
            params[f"{name}_at"], params[f"{name}_id"] = position.at, position.id
    column = order.field.value
    descending = order.direction is SortDirection.DESC
    direction = "desc" if descending != from_end else "asc"
    sql = first_per_owner(
        " and ".join(f"({c})" for c in bounded) or "true",
        f"m.{column} {direction}, m.id {direction}",
    )
    rows = await _fetch_memories(conn, sql, {**params, "limit": window.size + 1})
    more = len(rows) > window.size
    rows = rows[: window.size]
    if from_end:
        rows.reverse()
    start, name = (window.before, "before") if from_end else (window.after, "after")
    behind = False
    if start is not None:
        # anything at or on the near side of the starting cursor
        outside = f"not ({_beyond(order, name, forward=not from_end)})"
        cur = await conn.execute(
            f"""select exists (select 1 from memories m
                where {" and ".join(f"({c})" for c in [VISIBLE, *conditions, outside])})""",
            params,
        )
        row = await cur.fetchone()
        behind = bool(row and row[0])
    return rows, more, behind


async def count_matching(conn: Conn, principal: Principal, criteria: Criteria) -> int:
    """How many memories a read's filter admits (over all the pages of a list)."""
    conditions, params = _conditions(principal, criteria)
    if conditions == [LIVE]:
        # every live memory of the scopes: the owners' counters
        return await count_live(conn, principal, criteria.scopes)
    cur = await conn.execute(
        "select count(*) from memories m where "
        + " and ".join(f"({c})" for c in [VISIBLE, *conditions]),
        params,
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def context_memories(
    conn: Conn, principal: Principal, criteria: Criteria, limit: int
) -> tuple[list[ContextItem], int]:
    """Live memories for a context block that the filter admits, pinned first then newest;
    and how many it admits. Only the columns the block shows are read: up to `limit` rows are
    decoded here, of which the budget may show a few."""
    conditions, params = _conditions(principal, criteria)
    order = "m.pinned desc, m.created_at desc, m.id desc"
    where = " and ".join(f"({c})" for c in conditions) or "true"
    sql = first_per_owner(where, order, CONTEXT_COLUMNS)
    cur = await conn.execute(sql, {**params, "limit": limit})
    items = [
        ContextItem(Kind(kind), content, category, pinned, occurred_at)
        for kind, content, category, pinned, occurred_at, *_order in await cur.fetchall()
    ]
    return items, await count_matching(conn, principal, criteria)


async def count_live(conn: Conn, principal: Principal, scopes: Sequence[Scope]) -> int:
    """Live memories in `scopes`: each owner's counter (kept by the writes, 009_owner_counts.sql)
    less its memories that have expired without being invalidated, read from the index of
    memories with an expiry. Nothing here grows with an owner's memories."""
    expired = "m.invalidated_at is null and m.expires_at <= now()"
    cur = await conn.execute(
        f"""
        select coalesce((select sum(c.live) from memory_counts c
                         where c.project_id = %(project_id)s and (
                             (c.scope = 'user' and c.owner_id = %(user_id)s
                              and 'user' = any(%(scopes)s))
                             or (c.scope = 'project' and c.owner_id = ''
                                 and 'project' = any(%(scopes)s)))), 0)
             - (select count(*) from memories m
                where 'user' = any(%(scopes)s) and {OWN} and {expired})
             - (select count(*) from memories m
                where 'project' = any(%(scopes)s) and {SHARED} and {expired})
        """,
        visibility(principal, scopes),
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0
