"""The MCP tool seam without a server: which tools a grant offers, and what their schemas say."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from memql.mcp.tools import TOOLS, SaveArgs, save_json, tool_names
from memql.model import (
    Access,
    Consumer,
    Grant,
    Kind,
    NearDuplicate,
    Principal,
    SaveOutcome,
    SaveResult,
)
from tests.factories import memory

READ = ["recall_memory", "list_memories"]
ALL = [*READ, "save_memory", "supersede_memory", "forget_memory"]


def principal(user: Access, project: Access) -> Principal:
    return Principal(
        project_id=uuid.uuid4(),
        project_name="p",
        user_id="alice",
        consumer=Consumer.AGENT,
        grant=Grant(user=user, project=project),
    )


@pytest.mark.parametrize(
    ("user", "project", "expected"),
    [
        (Access.READ, Access.NONE, READ),
        (Access.READ, Access.READ, READ),
        (Access.NONE, Access.READ, READ),
        (Access.READ_WRITE, Access.NONE, ALL),
        (Access.READ, Access.READ_WRITE, ALL),
        (Access.READ_WRITE, Access.READ_WRITE, ALL),
        (Access.NONE, Access.NONE, []),
    ],
)
def test_a_grant_offers_reading_tools_when_readable_and_writing_tools_when_writable(
    user, project, expected
):
    assert tool_names(principal(user, project)) == expected


def test_every_tool_schema_rejects_unknown_fields_and_describes_every_argument():
    for tool in TOOLS:
        schema = tool.args.input_schema()
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False, tool.name
        assert schema["properties"], tool.name
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
            assert "anyOf" not in prop, f"{tool.name}.{name} is a union"


def test_unknown_arguments_fail_validation_naming_the_field():
    with pytest.raises(ValidationError) as caught:
        SaveArgs.model_validate({"content": "Likes tea.", "kind": "topical", "colour": "red"})
    assert caught.value.errors()[0]["type"] == "extra_forbidden"
    assert caught.value.errors()[0]["loc"] == ("colour",)


def test_kind_and_scope_accept_only_their_values():
    with pytest.raises(ValidationError):
        SaveArgs.model_validate({"content": "Likes tea.", "kind": "fact"})
    with pytest.raises(ValidationError):
        SaveArgs.model_validate({"content": "Likes tea.", "kind": "topical", "scope": "team"})


def test_an_absorbed_save_names_the_existing_memory_and_suggests_superseding_near_duplicates():
    existing = memory("Prefers tea.")
    other = memory("Prefers green tea.", Kind.OPERATIONAL)
    body = save_json(SaveResult(SaveOutcome.ABSORBED, existing, (NearDuplicate(other, 0.9123),)))
    assert body["outcome"] == "absorbed"
    assert body["memory"]["id"] == str(existing.id)
    assert str(existing.id) in body["note"]
    assert body["near_duplicates"] == [
        {
            "id": str(other.id),
            "content": "Prefers green tea.",
            "kind": "operational",
            "key": None,
            "similarity": 0.912,
        }
    ]
    assert "supersede_memory" in body["note"]
