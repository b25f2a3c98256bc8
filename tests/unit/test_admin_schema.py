"""The checked-in schema.admin.graphql is the admin API's schema the code serves."""

from __future__ import annotations

from pathlib import Path

from memql.graphql.admin.schema import schema

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema.admin.graphql"


def test_schema_admin_graphql_matches_the_code():
    assert SCHEMA_FILE.read_text() == schema.as_str() + "\n", (
        "schema.admin.graphql is stale: python -m memql.graphql.admin.export > schema.admin.graphql"
    )
