"""`memql.graphql.persisted`: the persisted-query store keeps the most recently used queries of
each project, bounded by count and by characters."""

from __future__ import annotations

from memql.graphql.persisted import PersistedQueries


def test_the_store_keeps_the_most_recently_used_queries_up_to_its_capacity():
    store = PersistedQueries(2)
    store.put("p", "a", "query A { a }")
    store.put("p", "b", "query B { b }")
    assert store.get("p", "a") == "query A { a }"  # a is now the most recent
    store.put("p", "c", "query C { c }")
    assert (store.get("p", "a"), store.get("p", "b"), store.get("p", "c")) == (
        "query A { a }",
        None,
        "query C { c }",
    )
    assert len(store) == 2


def test_the_store_is_bounded_by_characters_too():
    store = PersistedQueries(100, max_chars=30)
    store.put("p", "a", "a" * 12)
    store.put("p", "b", "b" * 12)
    store.put("p", "c", "c" * 12)  # 36 characters: the oldest goes
    assert (store.get("p", "a"), len(store)) == (None, 2)
    store.put("p", "huge", "x" * 31)  # longer than the whole budget: not kept, nothing evicted
    assert (store.get("p", "huge"), len(store)) == (None, 2)
    store.put("p", "b", "b" * 12)  # the same hash again counts once
    assert (store.get("p", "b"), store.get("p", "c")) == ("b" * 12, "c" * 12)


def test_each_project_has_its_own_queries_and_its_own_bounds():
    store = PersistedQueries(2)
    store.put("mine", "a", "query A { a }")
    assert store.get("theirs", "a") is None  # a hash confirms nothing of another project
    for n in range(10):  # another project filling its store evicts only its own queries
        store.put("theirs", f"h{n}", f"query Q{n} {{ a }}")
    assert store.get("mine", "a") == "query A { a }"
    assert len(store) == 3
