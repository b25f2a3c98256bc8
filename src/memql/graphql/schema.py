"""The GraphQL schema, assembled from the resolvers. Importing it opens nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import strawberry
from graphql import GraphQLError, OperationDefinitionNode
from graphql.validation import MaxIntrospectionDepthRule
from strawberry.extensions import (
    AddValidationRules,
    QueryDepthLimiter,
    SchemaExtension,
)
from strawberry.schema.config import StrawberryConfig

from memql.graphql.asgi import AuthoriseEachOperation
from memql.graphql.budgets import CostBudget, CostShares
from memql.graphql.documents import CachedDocuments, Documents
from memql.graphql.errors import classify
from memql.graphql.mutation import Mutation
from memql.graphql.operation_metrics import OperationMetrics
from memql.graphql.query import Query
from memql.graphql.rendering import RenderOnce
from memql.graphql.shape import max_aliases_rule
from memql.graphql.subscription import Subscription
from memql.graphql.write_budget import WriteBudget
from memql.settings import LIMITS, Limits

MAX_DEPTH = 10
MAX_ALIASES = 30
MAX_TOKENS = 4000
# the longest document text; comments and whitespace count, the token limit does not weigh them
MAX_DOCUMENT_BYTES = 64 * 1024


class MemqlSchema(strawberry.Schema):
    # parsed and validated documents, shared by the endpoint's own look at a request
    documents: Documents
    # what one request may spend, read by the endpoint for a batch's operations together
    max_writes: int
    max_aliases: int
    max_cost: int
    # the page and recall sizes requests are costed by
    limits: Limits
    # what each project's requests may cost together while they run (None: not shared)
    cost_shares: CostShares | None

    def process_errors(self, errors: list[Any], execution_context: Any = None) -> None:
        # expected errors are answers, not log noise: only the unexpected are logged
        for error in errors:
            classify(error)


class OperationNameRequired(SchemaExtension):
    """A document of several operations needs `operationName`: GraphQL says so, but Strawberry
    would run the first one. Refused at validation, so nothing runs."""

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        # the name the request gave (Strawberry's `operation_name` falls back to the first)
        given = getattr(context, "_provided_operation_name", None)
        if document is not None and given is None:
            operations = sum(isinstance(d, OperationDefinitionNode) for d in document.definitions)
            if operations > 1:
                error = GraphQLError(
                    "this document holds several operations: say which to run with `operationName`"
                )
                context.pre_execution_errors = [*(context.pre_execution_errors or []), error]
        yield


def build_schema(
    *,
    introspection: bool = True,
    max_writes: int = LIMITS.batch_save,
    batch_max: int = 0,
    max_document_bytes: int = MAX_DOCUMENT_BYTES,
    max_cost: int = 0,
    cost_at_once: int = 0,
    cost_wait: float = 5.0,
    limits: Limits = LIMITS,
    extensions: Sequence[Callable[[], SchemaExtension]] = (),
) -> MemqlSchema:
    """The schema with memql's limits. `max_writes`: the memories one request may write,
    across all its fields and aliases; `batch_max` > 0 lets one POST carry that many
    operations (a JSON array), sharing one request's budgets; `max_document_bytes`: the
    longest document text, refused before it is parsed; `max_cost`: the points one request
    may cost (0: not bounded); `cost_at_once`: the points one project's requests may cost
    together while they run, the next waiting up to `cost_wait` seconds for its turn (0: not
    shared). `limits`: the page and recall sizes requests are costed by. `extensions`: more
    extensions, around memql's own (tracing's, whose operation span encloses them)."""
    documents = Documents(max_bytes=max_document_bytes, max_tokens=MAX_TOKENS, limits=limits)
    shares = CostShares(cost_at_once, cost_wait) if cost_at_once else None
    # The limiters' rules are classes made by their constructors: made once here, so every
    # request validates with the same rules and the validation cache (keyed by them) hits
    rules = [
        *QueryDepthLimiter(max_depth=MAX_DEPTH).validation_rules,
        # the depth limiter skips introspection; this bounds its cyclic fields/type chains
        MaxIntrospectionDepthRule,
        # counts each fragment once, however often it is spread (Strawberry's MaxAliasesLimiter
        # walks it at every spread: exponential in fragments spreading each other)
        max_aliases_rule(MAX_ALIASES),
    ]
    every: list[Any] = [
        *extensions,
        OperationMetrics,
        lambda: AddValidationRules(rules),
        # parsing (bounded in bytes and tokens) and validation, cached by digest
        lambda: CachedDocuments(documents),
        # after validation, whose errors it adds to
        OperationNameRequired,
        lambda: WriteBudget(max_writes=max_writes),
        AuthoriseEachOperation,
        # after the write budget (whose refusal it leaves alone) and the websockets' credentials
        # (whose project it shares by)
        lambda: CostBudget(max_cost=max_cost, shares=shares, limits=limits),
    ]
    if not introspection:
        from strawberry.extensions import DisableIntrospection

        every.append(DisableIntrospection)
    built = MemqlSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        extensions=every,
        config=StrawberryConfig(
            disable_field_suggestions=not introspection,
            batching_config={"max_operations": batch_max} if batch_max else None,
        ),
        # a live event is executed once per distinct selection, not once per subscriber
        execution_context_class=RenderOnce,
    )
    built.documents = documents
    built.max_writes, built.max_aliases = max_writes, MAX_ALIASES
    built.max_cost, built.cost_shares, built.limits = max_cost, shares, limits
    return built


schema = build_schema()
