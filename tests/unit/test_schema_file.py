"""The checked-in schema.graphql is the schema the code serves."""

from __future__ import annotations

from pathlib import Path

from memql.graphql.schema import schema

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema.graphql"


def test_schema_graphql_matches_the_code():
    assert SCHEMA_FILE.read_text() == schema.as_str() + "\n", (
        "schema.graphql is stale: python -m memql.graphql.export > schema.graphql"
    )
