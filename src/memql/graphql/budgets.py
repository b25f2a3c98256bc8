"""One request's budgets, whatever its shape: a batched POST (a JSON array of operations) is one
request, so its operations share one write budget, one alias and field budget and one cost
budget (and, in `graphql/asgi.py`, one deadline with the database:
`db.session.request_deadline`).

Each operation alone is already held to the limits by the schema's guards (`WriteBudget`,
`CostBudget`, the alias limiter); without this, a batch of 20 would multiply each by 20. The
sums are counted before any operation runs, and a batch over one of them is refused whole:
nothing runs, nothing is written.

A request's cost (`cost`) is the event-loop work its fields ask for, counted from the document
before anything runs: every instance serves all its tenants on one event loop, and a request
within every other budget (30 aliased pages of 200 memories) could hold it for most of a
second. A request over `max_cost` is refused (BAD_USER_INPUT); below it, a project's requests
running at once on an instance share `CostShares`, so one project's expensive requests wait
for each other instead of every project's requests waiting behind them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from graphql import (
    DocumentNode,
    ExecutionResult,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLCompositeType,
    GraphQLError,
    GraphQLSchema,
    InlineFragmentNode,
    OperationType,
    SelectionSetNode,
    get_named_type,
    get_nullable_type,
    is_composite_type,
    is_list_type,
)
from graphql.type.definition import GraphQLInterfaceType, GraphQLObjectType
from graphql.utilities import get_operation_ast
from strawberry.extensions import SchemaExtension

from memql.errors import BadInput, RateLimited
from memql.graphql import shape
from memql.graphql.query import COUNT_ONLY
from memql.graphql.strawberry_internals import core_schema
from memql.graphql.write_budget import (
    argument,
    count_writes,
    field_writes,
    sum_root_fields,
    variable_values,
)
from memql.service.webhooks import MAX_PER_PROJECT as WEBHOOKS_PER_PROJECT
from memql.settings import LIMITS, Limits

log = logging.getLogger(__name__)

# top-level fields one request may ask for in all its operations: each is one call of the
# service; one operation alone reaches ~40 (its distinct fields and 30 aliases)
MAX_ROOT_FIELDS = 40


@dataclass(frozen=True)
class Budgets:
    """What one request may spend: `max_writes` memories, `max_aliases` aliased fields,
    `max_root_fields` top-level fields (each one call of the service) and `max_cost` points
    (`cost`; 0: not bounded) in all its operations."""

    max_writes: int
    max_aliases: int
    max_root_fields: int
    max_cost: int = 0


@dataclass(frozen=True)
class Planned:
    """One operation of a batch, parsed: what it would spend."""

    document: DocumentNode
    operation_name: str | None
    variables: Mapping[str, Any] | None


def aliases(document: DocumentNode) -> int:
    """Aliased fields in every operation of `document`, as the alias rule counts them."""
    return shape.aliases(document)


def root_fields(document: DocumentNode, operation_name: str | None) -> int:
    """Top-level fields of the operation that runs (fragments included, `__typename` free)."""
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return 0
    return sum_root_fields(document, operation, lambda field: field.name.value != "__typename")


def over_budget(
    budgets: Budgets, operations: Sequence[Planned], spent: int = 0
) -> GraphQLError | None:
    """The refusal of a batch whose operations together spend more than one request may;
    `spent`: their cost (`batch_cost`), checked first: within it, the other counts walk a
    bounded document (each of them expands every fragment where it is spread)."""
    if budgets.max_cost and spent > budgets.max_cost:
        return _refusal(over_cost(budgets.max_cost, spent, batch=True), budgets.max_cost)
    writes = sum(count_writes(o.document, o.operation_name, o.variables) for o in operations)
    if writes > budgets.max_writes:
        return _refusal(
            f"one request may write at most {budgets.max_writes} memories, across all its"
            f" operations, fields and aliases; this batch would write {writes}",
            budgets.max_writes,
        )
    aliased = sum(aliases(o.document) for o in operations)
    if aliased > budgets.max_aliases:
        return _refusal(
            f"one request may hold at most {budgets.max_aliases} aliases across all its"
            f" operations; this batch holds {aliased}",
            budgets.max_aliases,
        )
    fields = sum(root_fields(o.document, o.operation_name) for o in operations)
    if fields > budgets.max_root_fields:
        return _refusal(
            f"one request may ask for at most {budgets.max_root_fields} top-level fields"
            f" across all its operations; this batch asks for {fields}",
            budgets.max_root_fields,
        )
    return None


def batch_cost(
    schema: GraphQLSchema,
    operations: Sequence[Planned],
    limits: Limits = LIMITS,
    ceiling: int | None = None,
) -> int:
    """What the operations cost together (`cost`), counted no further than past `ceiling`."""
    spent = 0
    for o in operations:
        left = None if ceiling is None else ceiling - spent
        spent += cost(schema, o.document, o.operation_name, o.variables, limits, ceiling=left)
        if ceiling is not None and spent > ceiling:
            break
    return spent


def _refusal(message: str, limit: int) -> GraphQLError:
    # answered before any operation runs, so the schema's error classifier never sees it
    return GraphQLError(message, extensions={"code": BadInput.code, "limit": limit})


# --- what a request costs --------------------------------------------------------------------

# Points of event-loop work, weighed on the 2-core machine of docs/benchmarks.md, where one is
# 3 to 5 µs: a field resolved, an object built, a memory row read and mapped, a call of the
# service (its statements' round trips and their results, as the loop sees them), an
# operation's own setup. A field resolves once for each item of every list above it.
FIELD, OBJECT, ROW, CALL, OPERATION = 1, 5, 10, 150, 50
# `__schema` and `__type` count one call's worth, whatever they select (the introspection
# depth rule bounds them, and MEMQL_INTROSPECTION=false turns them off)
INTROSPECTION = CALL


def over_cost(max_cost: int, spent: int, *, batch: bool = False) -> str:
    whole = "this batch" if batch else "this one"
    return (
        f"one request may cost at most {max_cost} points (MEMQL_MAX_REQUEST_COST: each field"
        f" resolved, memory read and call of the service counts); {whole} would cost {spent}:"
        " ask for fewer aliases, smaller pages or fewer operations at once"
    )


# every list of objects in the schema, each sized in `_sizes`
LISTS = frozenset({
    ("Query", "recall"),
    ("Query", "memoryHistory"),
    ("Query", "webhooks"),
    ("Mutation", "saveMemories"),
    ("MemoryConnection", "edges"),
    ("SaveMemoryPayload", "nearDuplicates"),
    ("SupersedeMemoryPayload", "nearDuplicates"),
})  # fmt: skip


@dataclass
class _Frame:
    """Selections to cost: of `parent`, each field resolving `times` times; `page`: the size
    of the enclosing connection's page (its `edges`)."""

    selection_sets: list[SelectionSetNode]
    parent: GraphQLCompositeType
    times: int
    page: int = 0


def cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
    limits: Limits = LIMITS,
    *,
    ceiling: int | None = None,
) -> int:
    """The points of event-loop work the operation that runs asks for at most (0 for a
    subscription, whose events are not the request's). Counted from the document: a page at
    the size it asks for (or the default), a recall at its limit, every alias, fragment and
    field under `@skip`/`@include` (high, never low); fields that execution merges (the same
    response key) once. Read from a document not yet validated, so it never fails: what it
    does not know costs a field. Once the count passes `ceiling` it stops there: a few KB of
    fragments spread into each other can expand to a million fields, each worth a point."""
    operation = get_operation_ast(document, operation_name)
    if operation is None or operation.operation is OperationType.SUBSCRIPTION:
        return 0
    root = schema.mutation_type if operation.operation is OperationType.MUTATION else None
    root = root or schema.query_type
    if root is None:
        return OPERATION
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    values = variable_values(operation, variables)
    total = OPERATION
    # a stack, not recursion: a document of 4000 tokens can nest fragments a thousand deep
    stack = [_Frame([operation.selection_set], root, 1)]
    while stack:
        frame = stack.pop()
        for nodes in _collect(schema, frame, fragments).values():
            total += _field_cost(nodes, frame, values, limits, stack)
            if ceiling is not None and total > ceiling:
                return total
    return total


def _collect(
    schema: GraphQLSchema, frame: _Frame, fragments: Mapping[str, FragmentDefinitionNode]
) -> dict[str, list[tuple[FieldNode, GraphQLCompositeType]]]:
    """The fields of `frame`'s selection sets by response key (as execution merges them),
    each with the type it is selected on; every fragment once."""
    fields: dict[str, list[tuple[FieldNode, GraphQLCompositeType]]] = {}
    seen: set[str] = set()
    pending = [(s, frame.parent) for s in frame.selection_sets]
    while pending:
        selection_set, parent = pending.pop()
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                key = (selection.alias or selection.name).value
                fields.setdefault(key, []).append((selection, parent))
            elif isinstance(selection, InlineFragmentNode):
                pending.append((selection.selection_set, _on(schema, selection, parent)))
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = fragments.get(name)
                if fragment is not None and name not in seen:
                    seen.add(name)
                    pending.append((fragment.selection_set, _on(schema, fragment, parent)))
    return fields


def _on(
    schema: GraphQLSchema,
    fragment: InlineFragmentNode | FragmentDefinitionNode,
    parent: GraphQLCompositeType,
) -> GraphQLCompositeType:
    condition = fragment.type_condition
    named = schema.get_type(condition.name.value) if condition is not None else None
    return named if is_composite_type(named) else parent


def _field_cost(
    nodes: list[tuple[FieldNode, GraphQLCompositeType]],
    frame: _Frame,
    values: Mapping[str, Any],
    limits: Limits,
    stack: list[_Frame],
) -> int:
    """What one response key costs in all its resolutions; its selections pushed on `stack`."""
    node, parent = nodes[0]
    name = node.name.value
    if name in ("__schema", "__type"):
        return INTROSPECTION * frame.times
    definition = None
    for candidate, on in nodes:
        if isinstance(on, GraphQLObjectType | GraphQLInterfaceType) and name in on.fields:
            node, parent, definition = candidate, on, on.fields[name]
            break
    if definition is None:
        return FIELD * frame.times  # `__typename`, or a field validation will refuse
    calls, rows, items, page = _sizes(parent.name, node, nodes, frame, values, limits)
    spent = frame.times * (FIELD + CALL * calls + ROW * rows)
    named = get_named_type(definition.type)
    if is_composite_type(named):
        if not is_list_type(get_nullable_type(definition.type)):
            items = 1
        spent += frame.times * items * OBJECT
        selections = [n.selection_set for n, _ in nodes if n.selection_set is not None]
        stack.append(_Frame(selections, named, frame.times * items, page))
    return spent


def _sizes(
    parent: str,
    node: FieldNode,
    nodes: list[tuple[FieldNode, GraphQLCompositeType]],
    frame: _Frame,
    values: Mapping[str, Any],
    limits: Limits,
) -> tuple[int, int, int, int]:
    """A field's calls of the service, memory rows read, list items (when it is a list of
    objects) and page (for the connection below it), per resolution."""
    name = node.name.value
    if parent == "Mutation":
        writes = field_writes(node, values)
        return writes, 0, writes, 0
    if parent == "Query":
        if name == "viewer":
            return 0, 0, 1, 0
        if name == "memories":
            last = argument(node, "last", values)
            given = last if last is not None else argument(node, "first", values)
            page = _bounded(given, limits.list_default, limits.list_max)
            # a selection of the count alone reads no page (graphql/query.py `_selects_rows`)
            shown = any(
                not isinstance(s, FieldNode) or s.name.value not in COUNT_ONLY
                for n, _ in nodes
                if n.selection_set is not None
                for s in n.selection_set.selections
            )
            return (1, page, 1, page) if shown else (0, 0, 1, page)
        if name == "recall":
            hits = _bounded(
                argument(node, "limit", values), limits.recall_default, limits.recall_max
            )
            return 1, hits, hits, 0
        if name == "memoryHistory":
            return 1, limits.list_default, limits.list_default, 0
        if name == "memoryContext":
            return 1, limits.context_candidates, 1, 0
        if name == "webhooks":
            return 1, WEBHOOKS_PER_PROJECT, WEBHOOKS_PER_PROJECT, 0
        return 1, 1, 1, 0
    if (parent, name) in (("MemoryConnection", "totalCount"), ("Viewer", "eventCursor")):
        return 1, 0, 1, 0
    if (parent, name) == ("MemoryConnection", "edges"):
        return 0, 0, frame.page, 0
    if name == "nearDuplicates":
        return 0, 0, limits.near_duplicates_reported, 0
    # any other list of objects (none: `LISTS` names each, tests/unit/test_cost.py checks)
    return 0, 0, limits.list_max, 0


def _bounded(value: Any, default: int, most: int) -> int:
    """An argument's number as the service takes it: its default when not given (or not a
    number: refused later, costed as the default), at most `most`."""
    if not isinstance(value, int) or isinstance(value, bool):
        return default
    return max(0, min(value, most))


# --- what one project may have running at once -------------------------------------------------

SHARE_BUSY = (
    "this project's requests running now use its whole share of the server"
    " (MEMQL_PROJECT_COST_AT_ONCE); retry shortly, or send fewer expensive requests at once"
)


@dataclass
class _Project:
    running: int = 0
    # (cost, waiter), first come first served
    queue: deque[tuple[int, asyncio.Future[None]]] = field(default_factory=deque)


# set while a request holds its project's share (a batch, for all its operations)
_holding: ContextVar[bool] = ContextVar("memql_cost_share_held", default=False)


class CostShares:
    """One project's requests running at once on this instance cost at most `points` together
    (a request costing more runs alone); the next waits for its turn, first come first served,
    at most `wait` seconds, then is refused with TOO_MANY_REQUESTS. One event loop serves
    every tenant of an instance and work it has started cannot be taken back: bounding what
    each project has started bounds how long another project's request waits behind it."""

    def __init__(self, points: int, wait: float) -> None:
        self.points, self.wait = points, wait
        self._projects: dict[uuid.UUID, _Project] = {}
        self.refused = 0  # requests whose turn did not come within `wait`

    async def acquire(self, project_id: uuid.UUID, cost: int) -> int:
        """Wait for `cost` points of the project's share; the points held (at most the whole
        share), to `release`. Raises RateLimited when the turn does not come within `wait`."""
        cost = max(0, min(cost, self.points))
        project = self._projects.setdefault(project_id, _Project())
        if not project.queue and project.running + cost <= self.points:
            project.running += cost
            return cost
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (cost, waiter)
        project.queue.append(entry)
        try:
            async with asyncio.timeout(self.wait):
                await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                project.running -= cost  # given its turn as it gave up: the turn passes on
            else:
                waiter.cancel()
                project.queue.remove(entry)
            self._next(project_id, project)
            if isinstance(exc, TimeoutError):
                self.refused += 1
                log.warning(
                    "project %s waited %.2f s for its share of the server", project_id, self.wait
                )
                raise RateLimited(SHARE_BUSY, 1) from None
            raise
        return cost

    def release(self, project_id: uuid.UUID, held: int) -> None:
        project = self._projects.get(project_id)
        if project is not None:
            project.running -= held
            self._next(project_id, project)

    def _next(self, project_id: uuid.UUID, project: _Project) -> None:
        """Turns to the waiters at the head of the queue that now fit; the project forgotten
        when nothing of it runs or waits."""
        while project.queue and (
            project.running == 0 or project.running + project.queue[0][0] <= self.points
        ):
            cost, waiter = project.queue.popleft()
            project.running += cost
            waiter.set_result(None)
        if not project.running and not project.queue:
            self._projects.pop(project_id, None)

    def stats(self) -> dict[str, int]:
        """Requests waiting for their turn, the points running, projects running, refusals."""
        return {
            "waiting": sum(len(p.queue) for p in self._projects.values()),
            "points_running": sum(p.running for p in self._projects.values()),
            "projects_running": sum(1 for p in self._projects.values() if p.running),
            "refused": self.refused,
        }

    def running(self, project_id: uuid.UUID) -> tuple[int, int]:
        """The points of `project_id` running now, and its requests waiting."""
        project = self._projects.get(project_id)
        return (project.running, len(project.queue)) if project is not None else (0, 0)


@contextmanager
def holding_share() -> Iterator[None]:
    """Inside: the running request holds its project's share (its operations take none)."""
    token = _holding.set(True)
    try:
        yield
    finally:
        _holding.reset(token)


def holding() -> bool:
    """Whether the running request already holds its project's share."""
    return _holding.get()


class CostBudget(SchemaExtension):
    """Refuses, before execution, an operation costing more than `max_cost` points (0: not
    bounded), and runs the others within their project's share (`shares`; None: not shared).
    A batched HTTP request takes its share in `graphql/asgi.py`, once for all its operations."""

    def __init__(self, *, max_cost: int, shares: CostShares | None, limits: Limits) -> None:
        self.max_cost, self.shares, self.limits = max_cost, shares, limits

    async def on_execute(self) -> AsyncIterator[None]:
        context = self.execution_context
        document = context.graphql_document
        if document is None or context.result is not None:
            yield
            return
        spent = cost(
            core_schema(context.schema),
            document,
            context.operation_name,
            context.variables,
            self.limits,
            ceiling=self.max_cost or None,
        )
        if self.max_cost and spent > self.max_cost:
            refusal = BadInput(over_cost(self.max_cost, spent), limit=self.max_cost)
            # a result set here replaces execution: nothing runs, nothing is written
            context.result = ExecutionResult(
                data=None, errors=[GraphQLError(refusal.message, original_error=refusal)]
            )
            yield
            return
        project = _project_of(context.context)
        if self.shares is None or not spent or project is None or holding():
            yield
            return
        try:
            held = await self.shares.acquire(project, spent)
        except RateLimited as exc:
            context.result = ExecutionResult(
                data=None, errors=[GraphQLError(exc.message, original_error=exc)]
            )
            yield
            return
        try:
            yield
        finally:
            self.shares.release(project, held)


def _project_of(context: Any) -> uuid.UUID | None:
    """The project of an authenticated request's context; None otherwise (its fields refuse)."""
    if not getattr(context, "authenticated", False):
        return None
    project: uuid.UUID = context.principal.project_id
    return project
