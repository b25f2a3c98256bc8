"""The GraphQL schema, assembled from the resolvers. Importing it opens nothing."""

from __future__ import annotations

from typing import Any

import strawberry
from graphql.validation import MaxIntrospectionDepthRule
from strawberry.extensions import (
    AddValidationRules,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    ValidationCache,
)
from strawberry.schema.config import StrawberryConfig

from memql.metrics import OperationMetrics
from memql.resolvers.mutation import Mutation
from memql.resolvers.query import Query
from memql.resolvers.subscription import Subscription
from memql.schema.errors import classify
from memql.schema.rendering import RenderOnce

MAX_DEPTH = 10
MAX_ALIASES = 30
MAX_TOKENS = 4000


class MemqlSchema(strawberry.Schema):
    def process_errors(self, errors: list[Any], execution_context: Any = None) -> None:
        # expected errors are answers, not log noise: only the unexpected are logged
        for error in errors:
            classify(error)


def build_schema(*, introspection: bool = True) -> strawberry.Schema:
    extensions: list[Any] = [
        OperationMetrics,
        lambda: QueryDepthLimiter(max_depth=MAX_DEPTH),
        # the depth limiter skips introspection; this bounds its cyclic fields/type chains
        lambda: AddValidationRules([MaxIntrospectionDepthRule]),
        lambda: MaxAliasesLimiter(max_alias_count=MAX_ALIASES),
        lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
        lambda: ParserCache(maxsize=256),
        lambda: ValidationCache(maxsize=256),
    ]
    if not introspection:
        from strawberry.extensions import DisableIntrospection

        extensions.append(DisableIntrospection)
    return MemqlSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        extensions=extensions,
        config=StrawberryConfig(disable_field_suggestions=not introspection),
        # a live event is executed once per distinct selection, not once per subscriber
        execution_context_class=RenderOnce,
    )


schema = build_schema()
