"""`memql.graphql.documents`: documents are bounded by size before parsing and, once kept, by
their weight; a document sent without credentials is parsed but never kept."""

from __future__ import annotations

import pytest
from graphql import GraphQLError, parse, print_ast
from hypothesis import given, settings
from hypothesis import strategies as st

from memql.errors import BadInput
from memql.graphql.documents import Documents, without_comments


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


STRINGS_AND_COMMENTS = [
    '{ a(x: "# not a comment") # a comment\n b }',
    '{ a(x: """\n # kept\n \\""" # kept too\n """) # gone\n}',
    '{ a(x: "esc \\" # kept") } # gone',
    '{ a(x: """ ""# kept""") }',
    "# only a comment line\r\n{ a }\r\n# and another",
    '{ a(x: "") #\n}',
]


@pytest.mark.parametrize("text", STRINGS_AND_COMMENTS)
def test_comments_are_removed_before_lexing_and_strings_keep_every_character(text):
    assert "gone" not in without_comments(text)
    assert without_comments(text).count("kept") == text.count("kept")
    assert print_ast(parse(without_comments(text))) == print_ast(parse(text))


@pytest.mark.parametrize(
    "text",
    [
        "{ a # a comment\n  b(: 1) }",
        '{ a(x: "unterminated # not a comment\n) }',
        '{ a(x: """ never closed # \n # more\n',
        '{ a(x: "bad \\q escape # \n) } # after',
        "# first\n# second\n{ a } }",
    ],
)
def test_an_error_after_comments_names_the_same_place(text):
    with pytest.raises(GraphQLError) as original:
        parse(text)
    with pytest.raises(GraphQLError) as stripped:
        parse(without_comments(text))
    assert stripped.value.locations == original.value.locations
    assert stripped.value.message == original.value.message


_PIECES = ['"', '"""', "\\", '\\"""', "#", "\n", "\r\n", " ", "a", "{ a(x: ", ") }", "{", "}", "b"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30))
def test_any_text_parses_or_fails_alike_without_its_comments(pieces):
    text = "".join(pieces)

    def outcome(source: str) -> object:
        try:
            return print_ast(parse(source))
        except GraphQLError as exc:
            return exc.message, exc.locations

    stripped, original = outcome(without_comments(text)), outcome(text)
    if isinstance(original, str):
        assert stripped == original
    else:  # fails too (past a last comment, the end of the text has moved)
        assert isinstance(stripped, tuple), stripped
    # through Documents: the text's own error, always
    documents = Documents(max_bytes=10_000, max_tokens=1000)
    try:
        kept: object = print_ast(documents.parse(text, learn=False).document)
    except GraphQLError as exc:
        kept = exc.message, exc.locations
    except BadInput:
        return  # a shape refused (not what this is about)
    assert kept == original
