"""A request whose document was seen before is not validated again: the schema's limits are
the same rule classes on every request, so Strawberry's validation cache (keyed by them) hits.
The limits still refuse what they refused."""

from __future__ import annotations

import uuid

import pytest
import strawberry.schema.schema as strawberry_schema

from memql.graphql.schema import build_schema


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    validate = strawberry_schema.validate

    def counting(schema, document, rules):  # type: ignore[no-untyped-def]
        seen.append(document.loc.source.body)
        return validate(schema, document, rules)

    monkeypatch.setattr(strawberry_schema, "validate", counting)
    return seen


async def test_the_same_document_is_validated_once(validations: list[str]):
    schema = build_schema()
    # a text no other test sends, so the process-wide cache has not seen it
    query = f"{{ __typename tag_{uuid.uuid4().hex}: __typename }}"
    for _ in range(3):
        result = await schema.execute(query)
        assert result.errors is None, result.errors
    assert validations == [query]


async def test_the_limits_refuse_on_every_request(validations: list[str]):
    schema = build_schema()
    deep = "{ __schema { types { " + "fields { type { " * 4 + "name" + " } }" * 4 + " } } }"
    aliases = "{ " + " ".join(f"a{i}_{uuid.uuid4().hex}: __typename" for i in range(40)) + " }"
    for query in (deep, aliases):
        for _ in range(2):
            result = await schema.execute(query)
            assert result.errors, query
    assert len(validations) <= 2


def test_documents_are_bounded_by_size_before_parsing_and_by_weight_once_kept():
    from graphql import GraphQLError

    from memql.errors import BadInput
    from memql.graphql.documents import Documents

    documents = Documents(max_bytes=2048, max_tokens=4000, max_weight=20_000)
    # a few tokens and a long comment: refused by its size, the token limit never sees it
    padded = "{ __typename }\n" + "# " + "x" * 3000
    with pytest.raises(BadInput, match="larger than 2048 bytes"):
        documents.parse(padded, learn=True)
    # multi-byte text counts in bytes
    with pytest.raises(BadInput):
        documents.parse("{ __typename } #" + "語" * 700, learn=True)
    assert len(documents) == 0
    with pytest.raises(GraphQLError):
        documents.parse("{ " * 10, learn=True)
    # kept documents weigh their text and their tokens: the bound holds whatever their count
    for n in range(50):
        documents.parse(f"{{ a{n}: __typename b: __typename c: __typename }}", learn=True)
    assert 0 < documents.weight <= 20_000 and len(documents) < 50
    # without credentials a document is parsed but never kept
    documents.parse("{ unseen: __typename }", learn=False)
    assert documents.key("{ unseen: __typename }") not in documents._entries
