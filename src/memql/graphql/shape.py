"""A document's shape, measured in one linear pass before it is validated.

graphql-core's validation is not linear in a document: OverlappingFieldsCanBeMergedRule compares
every pair of fields that share a response key in one selection set (300 repeats of
`viewer { userId }`, 5 KB, held the event loop 0.5-1.7 s), and a count that expands each
fragment where it is spread (Strawberry's alias limiter) doubles with every fragment that spreads
the next one twice (a 1,000-word document: a second; 30 fragments: more than 20 s). The bytes and
tokens bounds do not see either: both shapes are small.

So before validation, `measure` walks the document once, every selection set once (a fragment's
totals are kept and added where it is spread, never walked again), and `check` refuses:
- a selection set of more than `Limits.selections_per_set` selections, or of more fields than
  that once its inline fragments and fragments are merged into it (as validation merges them);
- a response key selected more than `Limits.key_repeats` times in one selection set (its
  fragments included), whose pairs validation compares;
- more than `Limits.expanded_fields` fields once every fragment is expanded where it is spread;
- a fragment that spreads itself, directly or through others (validation refuses it too).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
)

from memql.errors import BadInput
from memql.settings import LIMITS, Limits

# totals are kept no higher than this: an exponential expansion stays a small number
_CAP = 1 << 62


@dataclass(frozen=True)
class Shape:
    """What a document holds once every fragment is expanded where it is spread (each capped)."""

    fields: int
    aliases: int


def refused(message: str, limit: int) -> BadInput:
    return BadInput(
        f"{message}: this GraphQL document is refused before it is validated", limit=limit
    )


def measure(document: DocumentNode, limits: Limits = LIMITS) -> Shape:
    """The document's expanded field and alias counts, every operation's together. Raises
    BadInput for a selection set over `limits.selections_per_set` or `limits.key_repeats`, or
    for a fragment cycle. Linear in the document: each selection set is walked once, and what
    a fragment merges into the set it is spread in is kept (at most `selections_per_set`
    fields, so adding it where it is spread stays cheap)."""
    fragments: dict[str, FragmentDefinitionNode] = {}
    for definition in document.definitions:
        if isinstance(definition, FragmentDefinitionNode):
            fragments.setdefault(definition.name.value, definition)
    names = {id(f.selection_set): f.name.value for f in fragments.values()}
    totals: dict[int, tuple[int, int]] = {}
    # the response keys an inline fragment's or a fragment's set merges into its parent's
    merged: dict[int, Counter[str]] = {}
    # selection sets begun and not finished: the path from a root, where a cycle shows
    open_sets: set[int] = set()
    operations = (0, 0)
    for definition in document.definitions:
        if not isinstance(definition, OperationDefinitionNode | FragmentDefinitionNode):
            continue
        root = definition.selection_set
        # (selection set, whether its parent merges its keys, children done)
        stack: list[tuple[SelectionSetNode, bool, bool]] = [(root, True, False)]
        while stack:
            node, merges, done = stack.pop()
            key = id(node)
            if done:
                open_sets.discard(key)
                totals[key] = _sum(node, totals, fragments)
                keys = _keys(node, merged, fragments, limits)
                if merges:
                    merged[key] = keys
                continue
            if key in totals:
                continue
            if key in open_sets:
                raise refused(
                    f"fragment `{names.get(key, '?')}` spreads itself, directly or through"
                    " other fragments",
                    0,
                )
            if len(node.selections) > limits.selections_per_set:
                raise _too_many(len(node.selections), limits)
            open_sets.add(key)
            stack.append((node, merges, True))
            for selection in node.selections:
                if isinstance(selection, FieldNode):
                    if selection.selection_set is not None:
                        stack.append((selection.selection_set, False, False))
                elif isinstance(selection, InlineFragmentNode):
                    stack.append((selection.selection_set, True, False))
                elif isinstance(selection, FragmentSpreadNode):
                    fragment = fragments.get(selection.name.value)
                    if fragment is not None:
                        stack.append((fragment.selection_set, True, False))
        if isinstance(definition, OperationDefinitionNode):
            fields, aliases = totals[id(root)]
            operations = (min(operations[0] + fields, _CAP), min(operations[1] + aliases, _CAP))
    return Shape(*operations)


def _too_many(count: int, limits: Limits) -> BadInput:
    return refused(
        f"a selection set may hold at most {limits.selections_per_set} selections (fields,"
        f" fragment spreads and inline fragments, and the fields its fragments bring); one"
        f" holds {count}",
        limits.selections_per_set,
    )


def _sum(
    node: SelectionSetNode,
    totals: dict[int, tuple[int, int]],
    fragments: dict[str, FragmentDefinitionNode],
) -> tuple[int, int]:
    """A selection set's expanded fields and aliases, from its children's totals."""
    fields = aliases = 0
    for selection in node.selections:
        below: SelectionSetNode | None = None
        if isinstance(selection, FieldNode):
            fields += 1
            aliases += selection.alias is not None
            below = selection.selection_set
        elif isinstance(selection, InlineFragmentNode):
            below = selection.selection_set
        elif isinstance(selection, FragmentSpreadNode):
            fragment = fragments.get(selection.name.value)
            below = fragment.selection_set if fragment is not None else None
        if below is not None:
            more_fields, more_aliases = totals[id(below)]
            fields, aliases = fields + more_fields, aliases + more_aliases
    return min(fields, _CAP), min(aliases, _CAP)


def _keys(
    node: SelectionSetNode,
    merged: dict[int, Counter[str]],
    fragments: dict[str, FragmentDefinitionNode],
    limits: Limits,
) -> Counter[str]:
    """The response keys validation merges into one selection set: its fields', its inline
    fragments' and its fragments' (each fragment once, as validation collects them), checked
    against `selections_per_set` and `key_repeats`."""
    keys: Counter[str] = Counter()
    spread: set[str] = set()
    for selection in node.selections:
        if isinstance(selection, FieldNode):
            keys[(selection.alias or selection.name).value] += 1
        elif isinstance(selection, InlineFragmentNode):
            keys.update(merged[id(selection.selection_set)])
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            if name in fragments and name not in spread:
                spread.add(name)
                keys.update(merged[id(fragments[name].selection_set)])
    count = sum(keys.values())
    if count > limits.selections_per_set:
        raise _too_many(count, limits)
    if keys:
        name, repeats = keys.most_common(1)[0]
        if repeats > limits.key_repeats:
            raise refused(
                f"a selection set may select one response key at most {limits.key_repeats}"
                f" times, its fragments included; `{name}` is selected {repeats} times",
                limits.key_repeats,
            )
    return keys


def check(document: DocumentNode, limits: Limits = LIMITS) -> Shape:
    """`measure`, and a refusal (BadInput) for more than `limits.expanded_fields` fields."""
    shape = measure(document, limits)
    if shape.fields > limits.expanded_fields:
        raise refused(
            f"a document may hold at most {limits.expanded_fields} fields once every fragment"
            f" is expanded where it is spread; this one holds {shape.fields}",
            limits.expanded_fields,
        )
    return shape


def aliases(document: DocumentNode) -> int:
    """Aliased fields in every operation of `document`, each fragment counted where it is
    spread (as Strawberry's alias limiter counts them, without walking a fragment twice)."""
    try:
        return measure(document, Limits(selections_per_set=_CAP, key_repeats=_CAP)).aliases
    except BadInput:
        return 0  # a fragment cycle, which validation refuses


def max_aliases_rule(max_aliases: int) -> type[ValidationRule]:
    """A validation rule refusing a document of more than `max_aliases` aliases (in place of
    Strawberry's MaxAliasesLimiter, whose count walks each fragment wherever it is spread)."""

    class MaxAliases(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            found = aliases(context.document)
            if found > max_aliases:
                context.report_error(GraphQLError(f"{found} aliases found. Allowed: {max_aliases}"))

    return MaxAliases
