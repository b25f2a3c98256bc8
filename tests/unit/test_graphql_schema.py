"""`memql.graphql.schema`: the checked-in schema.graphql is the schema the code serves; a
request whose document was seen before is not validated again (the schema's limits are the same
rule classes on every request, so Strawberry's validation cache, keyed by them, hits), and the
limits still refuse what they refused."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import strawberry.schema.schema as strawberry_schema

from memql.graphql.schema import build_schema, schema

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema.graphql"


def test_schema_graphql_matches_the_code():
    assert SCHEMA_FILE.read_text() == schema.as_str() + "\n", (
        "schema.graphql is stale: python -m memql.graphql.export > schema.graphql"
    )


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
