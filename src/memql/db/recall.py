"""The SQL of recall: one statement scores the caller's own live memories and a pool of the
shared ones by vector, full text, recency and pin."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from psycopg import AsyncCursor
from psycopg.rows import dict_row

from memql.db.filters import Condition, filter_conditions, where
from memql.db.pool import Conn
from memql.db.rows import MEMORY_COLUMNS, memory_from_row
from memql.db.visibility import OWN, SHARED, visibility
from memql.embeddings import Vector
from memql.model import Memory, Principal, Scope, Weights
from memql.requests import Criteria

# shared (project-scope) candidates taken by each of vector and full-text order before fusion
PROJECT_POOL = 200
# the query's stemmed words, ORed
TSQUERY = "replace(plainto_tsquery('english', %(query)s)::text, ' & ', ' | ')::tsquery"
# the query's distinct stemmed words in the order written, each a tsquery's text ('word'), at
# most LEXICAL_WORDS of them
WORDS = """array(
    select w from unnest(string_to_array(plainto_tsquery('english', %(query)s)::text, ' & '))
        with ordinality t(w, i)
    where w <> '' group by w order by min(i) limit %(words)s)"""
# Full text over the shared scope reads a bounded number of rows, whatever its size: the rows
# holding two or more of the query's first LEXICAL_PAIR_WORDS words (the best matches; each pair
# is one index search), at most LEXICAL_SEVERAL of them, and up to LEXICAL_PER_WORD rows holding
# each of its first LEXICAL_WORDS words. A row holding one word ranks like any other holding one
# word, so which of a common word's rows come in is arbitrary either way; a rare word's rows
# (a name, a code) all come in. These are then ranked and the best PROJECT_POOL join the pool.
LEXICAL_WORDS = 16
LEXICAL_PAIR_WORDS = 8
LEXICAL_PER_WORD = 10
LEXICAL_SEVERAL = 500
# a filtered project recall scores every matching shared row when there are at most this many
# (an exact scan of a few thousand rows costs a few milliseconds, where the HNSW route would
# walk much of the graph to find the few rows a selective filter keeps)
EXACT_SCAN_ROWS = 5_000
# how far an HNSW iterative scan may go looking for rows that pass the filters
HNSW_MAX_SCAN_TUPLES = 50_000
# candidates per HNSW search step; an iterative scan takes further steps until the pool is full
HNSW_EF_SEARCH = 100
# Rewordings give way: among the CROWD (or `limit`) best by the fused score, a memory whose
# meaning is close to one ranked above it (cosine past ALIKE_ABOVE) loses REDUNDANCY_PENALTY
# times the excess, so a second and third wording of one fact stop pushing a different fact out
# of the top few. The best never moves (nothing is above it), and a score only goes down,
# staying in [0, 1]. (Near-copies, past MEMQL_ABSORB_THRESHOLD, never become two memories.)
CROWD = 30
ALIKE_ABOVE = 0.6
REDUNDANCY_PENALTY = 0.6
# what a recall's transaction sets (with the principal, in one round trip: see bind_principal);
# relaxed order: the pool is re-scored, so HNSW's order need not be exact
RECALL_SETTINGS = (
    ("hnsw.iterative_scan", "relaxed_order"),
    ("hnsw.max_scan_tuples", str(HNSW_MAX_SCAN_TUPLES)),
    ("hnsw.ef_search", str(HNSW_EF_SEARCH)),
)


async def recall(
    conn: Conn,
    principal: Principal,
    *,
    query: str,
    embedding: Vector,
    model: str,
    criteria: Criteria,
    weights: Weights,
    limit: int,
    routed: bool = False,
) -> Ranked:
    """Rank the principal's live memories of `model` that `criteria` admits against `query`;
    best first.

    The caller's own (user-scope) memories are all scored, so their top `limit` is exact. Shared
    project-scope memories can be many: the `PROJECT_POOL` nearest by vector and the
    `PROJECT_POOL` best by full text join the pool. By vector, a filter that keeps at most
    `EXACT_SCAN_ROWS` shared rows scores them all (exact); otherwise the dimension's HNSW index
    answers, with an iterative scan so filters never starve it (see `ensure_ann_index`). Below
    `PROJECT_POOL` matching rows that is every row, so small projects are exact too. By full
    text, such a filter's rows are all matched too; otherwise a bounded set of the shared rows
    that match is ranked (see `LEXICAL_WORDS`). The lexical query ORs the stemmed words of
    `query`; its rank is normalised by the best match in the pool. Of the best by the fused
    score, a hit close in meaning to one ranked above it then gives way (see `CROWD`).

    `routed` (a Citus coordinator): every read of memories names the project plainly, so
    Citus sends the whole statement to the project's shard.
    """
    scopes = criteria.scopes
    conditions, filter_params = filter_conditions(criteria)
    # an index serves some of the filter: how many shared rows it keeps decides the route
    filtered = any(c.indexed for c in conditions)
    filters = [*conditions, Condition("m.embedding_model = %(model)s")]
    params: dict[str, Any] = {
        **visibility(principal, scopes),
        **filter_params,
        "query": query,
        "embedding": embedding,
        "model": model,
        "limit": limit,
        "pool": PROJECT_POOL,
        "words": LEXICAL_WORDS,
        "pair_words": LEXICAL_PAIR_WORDS,
        "per_word": LEXICAL_PER_WORD,
        "several": LEXICAL_SEVERAL,
        "w_vector": weights.vector,
        "w_lexical": weights.lexical,
        "w_recency": weights.recency,
        "w_pinned": weights.pinned,
        "half_life": weights.recency_half_life_days,
        "crowd": CROWD,
        "penalty": REDUNDANCY_PENALTY,
        "alike": ALIKE_ABOVE,
    }
    where_sql = where(filters)
    # the same filters written so that no index serves them and the planner assumes they keep
    # half the rows (`Condition.opaque`): the HNSW route must not be turned by its estimate
    # (one for any category) into a sort of every match
    where_opaque = where(filters, opaque=True)
    if filtered:
        params["exact_rows"] = EXACT_SCAN_ROWS
    # Each set of scopes has its own statement, holding only the branches it reads: a user-scope
    # recall neither plans nor starts the shared scope's. (One statement for every set, its
    # other branches cut by one-time filters, took 5.6-7.0 ms in user scope at 1,000,000
    # memories where this one takes 3.7-4.7 ms: docs/benchmarks.md.) psycopg prepares each.
    shared = Scope.PROJECT in scopes
    # the query's words feed only the shared scope's full-text branches
    words = f", {WORDS} as words" if shared else ""
    ctes = [f"q as materialized (select {TSQUERY} as tsq{words})"]
    branches: list[str] = []
    if Scope.USER in scopes:
        # whole rows, not ids joined back to memories: on fresh statistics the planner would
        # nest that join (pool x rows), quadratic in the caller's memories
        branches.append(f"select m.* from memories m where {OWN} and {where_sql}")
    if shared:
        # the dimension is spelt out (an int, not user input) so the planner can match the
        # expression index of `ensure_ann_index` even in a generic plan
        shared_ctes, shared_pool = shared_branches(
            where_sql, where_opaque, int(embedding.shape[0]), filtered, routed
        )
        ctes += shared_ctes
        branches += shared_pool
    if not branches:
        raise ValueError("recall needs at least one scope")
    sql = f"""
        with {", ".join(ctes)},
        pool as ({" union all ".join(branches)}),
        candidates as (
            -- a shared memory may come in by both routes: once each
            select distinct on (m.id) {MEMORY_COLUMNS},
                greatest(0, 1 - (m.embedding <=> %(embedding)s)) as vector_signal,
                case when m.fts @@ q.tsq then ts_rank_cd(m.fts, q.tsq) else 0 end as lexical_raw,
                power(0.5, extract(epoch from (now() - m.updated_at)) / 86400.0
                           / %(half_life)s) as recency_signal,
                case when m.pinned then 1.0 else 0.0 end as pinned_signal
            from pool m, q
            order by m.id
        ),
        signals as (
            select c.*,
                coalesce(c.lexical_raw / nullif(max(c.lexical_raw) over (), 0), 0)
                    as lexical_signal
            from candidates c
        ),
        f as (
            select s.*,
                %(w_vector)s * s.vector_signal + %(w_lexical)s * s.lexical_signal
                + %(w_recency)s * s.recency_signal + %(w_pinned)s * s.pinned_signal fused
            from signals s
        ),
        best as materialized (
            select * from f order by fused desc, created_at desc, id desc
            limit greatest(%(limit)s, %(crowd)s)
        ),
        -- each of the best, its nearest in meaning among those ranked above it (the same
        -- order, as a row's key): their vectors joined by primary key, the cosines of the
        -- 435 pairs (no vector is carried through the candidates)
        e as (
            select b.id, (b.fused, b.created_at, b.id) k, m.embedding v from best b
            join memories m on m.id = b.id
            where m.project_id = %(project_id)s
        ),
        d as materialized (select a.id, 1 - (a.v <=> o.v) x from e a join e o on o.k > a.k),
        r as (select id, max(x) x from d group by id)
        select b.*, coalesce(r.x, 0) redundancy_signal,
            greatest(0, b.fused - %(penalty)s * greatest(0, r.x - %(alike)s)) score
        from best b left join r using (id)
        order by score desc, b.created_at desc, b.id desc
        limit %(limit)s
    """
    cur = conn.cursor(row_factory=dict_row)
    # A filtered recall is planned for its own values each time (not prepared): PostgreSQL's
    # generic plan of a prepared statement, used after its fifth run, knows neither the filter
    # nor how few rows it keeps, and took 39 ms at 1,000,000 memories where the plan made for
    # the values took 12 ms (docs/scale.md). Unfiltered, the generic plan saves the planning.
    await cur.execute(compact(sql), params, prepare=False if filtered else None)
    return Ranked(cur)


def shared_branches(
    where: str, where_opaque: str, dims: int, filtered: bool, routed: bool = False
) -> tuple[list[str], list[str]]:
    """The common table expressions and the pool's branches that read the shared scope: its
    rows by vector (an exact scan or the HNSW index) and by full text."""
    ctes: list[str] = []
    # Filtered, the few-rows routes (`exact`: every matching row) and the index routes (`many`)
    # are both written, and the count decides at run time which runs. Unfiltered, the HNSW
    # route is the faster from a few hundred rows on, and exact below PROJECT_POOL rows anyway
    # (it returns every row): only the index routes are written.
    exact, many = "", ""
    if filtered:
        ctes.append(f"""filtered as (
            select count(*) as n from (
                select from memories m where {SHARED} and {where}
                limit %(exact_rows)s + 1) f
        )""")
        few = "((select n from filtered) <= %(exact_rows)s)"
        exact, many = f" and {few}", f" and not {few}"
    ctes.append("""pairs as materialized (
            select array(
                select format('%%s & %%s', a.w, b.w)::tsquery
                from unnest(q.words[1:%(pair_words)s]) with ordinality a(w, i),
                     unnest(q.words[1:%(pair_words)s]) with ordinality b(w, i)
                where a.i < b.i) as each
            from q
        )""")
    # the owner written so that no B-tree serves it (the planner underestimates a shared scope
    # and would test every row of it), for the GIN index of shared rows
    shared_by_gin = (
        "m.scope = 'project' and coalesce(m.project_id = %(project_id)s and m.owner_id = '', false)"
    )
    if routed:
        # Citus prunes shards on a plain equality only (within each shard the project's rows
        # are a share of the shard's, so the estimate this avoids above matters less there)
        shared_by_gin = f"m.project_id = %(project_id)s and {shared_by_gin}"
    lexical = [
        # through the GIN index: the rows holding two of the query's words
        f"""(select m.* from memories m
             where {shared_by_gin} and {where}{many}
               and m.fts @@ any((select each from pairs)::tsquery[])
             limit %(several)s)""",
        # and a few rows holding each word
        f"""select h.* from q, unnest(q.words) w,
                lateral (select m.* from memories m
                         where {shared_by_gin} and {where}{many} and m.fts @@ w::tsquery
                         limit %(per_word)s) h""",
    ]
    # by vector: the HNSW index, whose iterative scan skips rows the filters reject
    pool = [
        f"""(select m.* from memories m
             where {SHARED} and {where_opaque}{many} and vector_dims(m.embedding) = {dims}
             order by (m.embedding::vector({dims})) <=> %(embedding)s
             limit %(pool)s)""",
    ]
    if filtered:
        # few rows pass the filters: every one that matches, by vector and by full text (the
        # planner cannot know how few: it picks one plan for every category; the count is an
        # init plan, so only the chosen route runs)
        lexical.insert(
            0,
            f"""(select m.* from memories m
             where {SHARED} and {where}{exact} and m.fts @@ (select tsq from q))""",
        )
        pool.insert(
            0,
            f"""(select m.* from memories m
             where {SHARED} and {where}{exact} and vector_dims(m.embedding) = {dims}
             order by m.embedding <=> %(embedding)s
             limit %(pool)s)""",
        )
    ctes.append(f"lexical as ({' union all '.join(lexical)})")
    pool.append(
        # by full text: the best of a bounded set of shared rows (see LEXICAL_WORDS)
        """(select l.* from (select distinct on (x.id) x.* from lexical x order by x.id) l, q
             order by ts_rank_cd(l.fts, q.tsq) desc
             limit %(pool)s)"""
    )
    return ctes, pool


@lru_cache(maxsize=64)
def compact(sql: str) -> str:
    """`sql` without its comments and with its white space folded: the same statement, short
    enough (unfiltered) that psycopg keeps its parsed form instead of parsing it on every call
    (it keeps statements of at most 4 KB)."""
    return " ".join(re.sub(r"--[^\n]*", "", sql).split())


Hit = tuple[Memory, float, dict[str, float]]


class Ranked:
    """Recall's answer, read from its statement's cursor once it has arrived: at once on a
    plain connection, after the block on a pipelined read (`Sessions.read`), where the statement
    only goes out, with the binding, when the block ends."""

    def __init__(self, cursor: AsyncCursor[dict[str, Any]]) -> None:
        self._cursor = cursor

    async def hits(self) -> list[Hit]:
        """The memories best first, each with its score and signals."""
        rows = await self._cursor.fetchall()
        await self._cursor.close()
        return [
            (
                memory_from_row(r),
                float(r["score"]),
                {
                    "vector": float(r["vector_signal"]),
                    "lexical": float(r["lexical_signal"]),
                    "recency": float(r["recency_signal"]),
                    "pinned": float(r["pinned_signal"]),
                    "redundancy": float(r["redundancy_signal"]),
                },
            )
            for r in rows
        ]
