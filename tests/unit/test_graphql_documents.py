"""`memql.graphql.documents`: documents are bounded by size before parsing and, once kept, by
their weight; a document sent without credentials is parsed but never kept."""

from __future__ import annotations

import pytest
from graphql import GraphQLError

from memql.errors import BadInput
from memql.graphql.documents import Documents


def test_documents_are_bounded_by_size_before_parsing_and_by_weight_once_kept():
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
