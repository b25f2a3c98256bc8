"""GraphQL documents: bounded in size before they are parsed, and parsed and validated once
per distinct text, in a cache bounded by what it holds.

A document's text is bounded first (`max_bytes`): the token limit does not see how long a
comment is, so a short query can carry megabytes of `#` lines. The cache is keyed by the
text's SHA-256 and bounded both by entries and by an estimate of the bytes an entry keeps
alive (the text, which error locations point into, plus each token and node parsed from it:
~200-400 bytes a token, measured with tracemalloc on graphql-core 3.3). Strawberry's own
caches are keyed by the text itself and bounded by count only: 256 texts of 4 MiB, each with
its token chain, stayed alive. Only requests with credentials add to the cache; anyone may
read from it, so a caller without credentials can neither fill nor evict it.

A parsed document's shape is checked before it is validated or kept (`shape.check`): validation
is quadratic or worse in some shapes a few KB can take, and every transport parses through here.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from graphql import DocumentNode, GraphQLError, get_operation_ast, parse
from strawberry.extensions import SchemaExtension

from memql.errors import BadInput
from memql.graphql import shape
from memql.graphql.strawberry_internals import core_schema, validate_document
from memql.settings import LIMITS, Limits

_NAME = re.compile(r"[_A-Za-z][_0-9A-Za-z]*")

# a comment runs from `#` to the end of its line; a string or block string may hold `#` (in a
# block string only `\"""` is an escape). An unterminated string is kept whole (to the end of
# its line; a block string to the end of the text), so the lexer's error names the same place.
# Possessive: one pass whatever the text
_COMMENT_OR_STRING = re.compile(
    r'"""(?:\\"""|[^"\\]|\\|"(?!""))*+(?:"""|\Z)|"(?:\\.|[^"\\\n\r])*+"?|#[^\n\r]*'
)


def without_comments(query: str) -> str:
    """`query` with its comments removed, each line otherwise as it was: it parses to the same
    document, and fails where the text fails (at the end of the text a last comment moved is
    the one exception: `Documents.parse` reads the text itself for the error). graphql-core's
    lexer reads a comment a character at a time in Python, ~10 ms for 64 KiB of them; the
    comments are gone in one pass of a regular expression first."""
    if "#" not in query:
        return query
    return _COMMENT_OR_STRING.sub(_kept, query)


def _kept(match: re.Match[str]) -> str:
    text = match.group()
    return "" if text.startswith("#") else text


# estimated bytes a parsed token keeps alive, with its share of the syntax tree
TOKEN_BYTES = 400


def too_large(max_bytes: int) -> BadInput:
    return BadInput(
        f"the GraphQL document is larger than {max_bytes} bytes (MEMQL_MAX_DOCUMENT_BYTES)",
        limit=max_bytes,
    )


def over(query: str, max_bytes: int) -> bool:
    """Whether `query` is longer than `max_bytes` in UTF-8 (encoded only when it may be)."""
    if len(query) > max_bytes:
        return True
    return len(query) * 4 > max_bytes and len(query.encode("utf-8", "surrogatepass")) > max_bytes


class ShapeRefused(BadInput):
    """A document that parsed, refused for its shape (`shape.check`) before validation."""

    def __init__(self, refusal: BadInput, document: DocumentNode) -> None:
        super().__init__(refusal.message, **refusal.extensions)
        self.document = document


@dataclass
class Entry:
    document: DocumentNode
    weight: int
    # the validation errors of the document, by the rules they were found with
    validated: dict[tuple[Any, ...], list[GraphQLError]] = field(default_factory=dict)


def _tokens(document: DocumentNode) -> int:
    loc = document.loc
    token = loc.start_token if loc is not None else None
    count = 0
    while token is not None:
        count += 1
        token = token.next
    return count


class Documents:
    """Parsed documents by SHA-256 of their text and parse options; at most `max_entries`
    and `max_weight` estimated bytes, least recently used out first."""

    def __init__(
        self,
        *,
        max_bytes: int,
        max_tokens: int,
        max_entries: int = 256,
        max_weight: int = 16 * 1024 * 1024,
        limits: Limits = LIMITS,
    ) -> None:
        self.max_bytes = max_bytes
        self.limits = limits
        self.max_tokens = max_tokens
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self.weight = 0

    @staticmethod
    def key(query: str) -> str:
        return hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()

    def parse(self, query: str, *, learn: bool) -> Entry:
        """The entry of `query`, parsed now if it is not kept; kept when `learn`. Raises
        BadInput for a text over `max_bytes` or of a shape validation would take too long on
        (`shape.check`), GraphQLError for one that does not parse."""
        if over(query, self.max_bytes):
            raise too_large(self.max_bytes)
        key = self.key(query)
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            return entry
        try:
            document = parse(without_comments(query), max_tokens=self.max_tokens)
        except GraphQLError:
            # the error as the text itself gives it (past a last comment, the end of the text
            # is further on)
            document = parse(query, max_tokens=self.max_tokens)
        # before anything validates it; a document refused here is never kept
        try:
            shape.check(document, self.limits)
        except BadInput as exc:
            raise ShapeRefused(exc, document) from None
        entry = Entry(document, len(query) + TOKEN_BYTES * _tokens(document))
        if learn:
            self._keep(key, entry)
        return entry

    def _keep(self, key: str, entry: Entry) -> None:
        if entry.weight > self.max_weight:
            return
        self._entries[key] = entry
        self.weight += entry.weight
        while len(self._entries) > self.max_entries or self.weight > self.max_weight:
            _, evicted = self._entries.popitem(last=False)
            self.weight -= evicted.weight

    def __len__(self) -> int:
        return len(self._entries)


def may_learn(context: Any) -> bool:
    """Whether a request may add to the caches: over HTTP and websockets only one that carries
    valid credentials (an execution in process, without a request's context, may)."""
    return bool(getattr(context, "authenticated", True))


def _placeholder(document: DocumentNode | None, operation_name: str | None) -> DocumentNode:
    """A document of one operation named `operation_name` (when it is a name), of the type
    the refused `document` asks for (a query when it is not known), never run."""
    operation = get_operation_ast(document, operation_name) if document is not None else None
    kind = operation.operation.value if operation is not None else "query"
    name = operation_name if operation_name and _NAME.fullmatch(operation_name) else ""
    return parse(f"{kind} {name} {{ __typename }}")


class CachedDocuments(SchemaExtension):
    """Parsing and validation through `Documents` (in place of Strawberry's ParserCache,
    ValidationCache and MaxTokensLimiter): a text over the size bound is refused before it is
    parsed, one over the token limit while it is, one of a refused shape before validation."""

    def __init__(self, documents: Documents) -> None:
        self.documents = documents
        self._entry: Entry | None = None

    def on_parse(self) -> Iterator[None]:
        context = self.execution_context
        if context.graphql_document is None and context.query:
            try:
                self._entry = self.documents.parse(context.query, learn=may_learn(context.context))
            except BadInput as exc:
                # refused as the operation's answer, before the parser (or validation) sees
                # the text. Not raised: over websockets Strawberry does not catch an error of
                # this hook, and the operation would end without an answer. A refusal set
                # before validation is the answer, and nothing runs; the document in its place
                # only names the requested operation, which Strawberry looks up first
                context.pre_execution_errors = [GraphQLError(exc.message, original_error=exc)]
                parsed = exc.document if isinstance(exc, ShapeRefused) else None
                context.graphql_document = _placeholder(parsed, context.operation_name)
            else:
                context.graphql_document = self._entry.document
        yield

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        entry = self._entry
        if entry is not None and context.graphql_document is entry.document:
            rules = tuple(context.validation_rules)
            errors = entry.validated.get(rules)
            if errors is None:
                errors = validate_document(core_schema(context.schema), entry.document, rules)
                entry.validated[rules] = errors
            # a copy: later guards add their own errors to the request's list
            context.pre_execution_errors = list(errors)
        yield
