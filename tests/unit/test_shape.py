"""The linear pass over a parsed document (graphql/shape.py): it refuses the shapes validation is
quadratic or exponential in, counts fields and aliases with each fragment expanded where it is
spread (without walking a fragment twice), and lets ordinary documents through."""

from __future__ import annotations

import time

import pytest
from graphql import get_introspection_query, parse
from strawberry.extensions.max_aliases import count_fields_with_alias

from memql.errors import BadInput
from memql.graphql import shape
from memql.settings import LIMITS
from tests import operations


def doubling(depth: int) -> str:
    """`depth` fragments, each spreading the next twice: 2**depth aliased fields expanded."""
    chain = "".join(f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }} " for i in range(depth))
    return f"{{ ...F0 }} {chain}fragment F{depth} on Query {{ a: __typename }}"


def test_fields_and_aliases_are_counted_with_every_fragment_expanded_where_it_is_spread():
    document = parse(
        "query { a: viewer { userId } ...F ...F } fragment F on Query { b: __typename viewer {"
        " userId } } query Q { c: __typename }"
    )
    # a + userId, twice (b + viewer + userId), c
    assert shape.check(document) == shape.Shape(fields=9, aliases=4)


def test_aliases_agree_with_the_count_they_replace():
    for text in (
        "query { a: ok ...F } fragment F on Query { b: ok ok }",
        doubling(8),
        "{ x: a { y: b { ... on T { z: c ...G } } } } fragment G on T { w: d }",
    ):
        document = parse(text)
        fragments = {d.name.value: d for d in document.definitions[1:]}  # type: ignore[attr-defined]
        expected = count_fields_with_alias(document.definitions[0], fragments)  # type: ignore[arg-type]
        assert shape.aliases(document) == expected


def test_fragments_spreading_each_other_are_counted_without_expanding_them():
    # a chain 1,000 deep, walked without recursion
    document = parse(doubling(1000), max_tokens=None)
    started = time.perf_counter()
    assert shape.aliases(document) == 1 << 62  # capped, not 2**1000
    with pytest.raises(BadInput, match="at most 2000 fields once every fragment is expanded"):
        shape.check(document)
    # not a timing: a walk that expanded the chain (2**1000 fields) would never end; the bound
    # only turns that into a failure instead of a hang
    assert time.perf_counter() - started < 10


def test_a_selection_set_over_its_bound_is_refused():
    fields = " ".join(f"f{n}" for n in range(LIMITS.selections_per_set + 1))
    with pytest.raises(BadInput, match="at most 200 selections") as refused:
        shape.check(parse(f"{{ viewer {{ {fields} }} }}"))
    assert refused.value.extensions == {"limit": LIMITS.selections_per_set}
    within = " ".join(f"f{n}" for n in range(LIMITS.selections_per_set))
    shape.check(parse(f"{{ viewer {{ {within} }} }}"))


@pytest.mark.parametrize(
    "text",
    [
        "{ " + "viewer { userId } " * 21 + "}",
        # through inline fragments and through distinct fragments: validation merges them
        "{ " + "... on Query { viewer { userId } } " * 21 + "}",
        "{ "
        + " ".join(f"...F{n}" for n in range(21))
        + " } "
        + " ".join(f"fragment F{n} on Query {{ viewer {{ userId }} }}" for n in range(21)),
    ],
)
def test_one_response_key_repeated_past_its_bound_is_refused(text):
    with pytest.raises(BadInput, match="`viewer` is selected 21 times"):
        shape.check(parse(text))


def test_a_fragment_spread_into_one_set_many_times_counts_once():
    spreads = " ".join(["...F"] * 150)
    shape.check(parse(f"{{ {spreads} }} fragment F on Query {{ viewer {{ userId }} }}"))


def test_fields_that_fragments_bring_into_one_set_count_against_its_bound():
    fragments = " ".join(
        f"fragment F{n} on Query {{ {' '.join(f'f{n}_{m}' for m in range(10))} }}"
        for n in range(21)
    )
    spreads = " ".join(f"...F{n}" for n in range(21))
    with pytest.raises(BadInput, match="one holds 210"):
        shape.check(parse(f"{{ {spreads} }} {fragments}"))


def test_a_fragment_cycle_is_refused_and_not_followed():
    with pytest.raises(BadInput, match="fragment `A` spreads itself"):
        shape.check(parse("{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }"))
    with pytest.raises(BadInput, match="spreads itself"):
        shape.check(parse("{ x } fragment A on Query { a ...A }"))
    # a cycle counts no alias (validation refuses it)
    assert shape.aliases(parse("{ ...A } fragment A on Query { a: x ...A }")) == 0


@pytest.mark.parametrize(
    "text",
    [
        get_introspection_query(
            descriptions=True,
            specified_by_url=True,
            directive_is_repeatable=True,
            schema_description=True,
            input_value_deprecation=True,
        ),
        *(v for v in vars(operations).values() if isinstance(v, str) and "{" in v),
    ],
)
def test_ordinary_documents_pass(text):
    shape.check(parse(text))
