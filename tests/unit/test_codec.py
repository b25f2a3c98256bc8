"""`memql.rules.codec`: a memory as JSON text and back (the broadcast, export files, event
payloads). Every field survives the trip; a record that cannot be a memory says which field."""

from __future__ import annotations

import json
import uuid
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memql.model import MEMORY_FIELDS, InvalidationReason, Kind, Memory, Scope
from memql.rules import codec
from tests.factories import memory

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# every field away from its default, so a field the codec dropped would show
FULL = replace(
    memory("Moved to Vienna.", Kind.EPISODIC, pinned=True, category="moves"),
    scope=Scope.PROJECT,
    owner_id="",
    key="home",
    source_thread_ids=("t1", "t2"),
    source={"app": "chat", "nested": {"n": [1, 2.5, None]}},
    expires_at=NOW + timedelta(days=30),
    invalidated_at=NOW + timedelta(days=1),
    invalidation_reason=InvalidationReason.SUPERSEDED,
    supersedes=uuid.uuid4(),
    superseded_by=uuid.uuid4(),
    occurred_at=datetime(2025, 6, 1, 8, tzinfo=UTC),
)


def through_json(m: Memory) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(json.dumps(codec.memory_to_dict(m)))
    return record


@pytest.mark.parametrize("m", [FULL, memory("Likes tea.")], ids=["every-field-set", "defaults"])
def test_every_field_survives_json_text_and_back(m: Memory):
    assert set(codec.memory_to_dict(m)) == set(MEMORY_FIELDS) == {f.name for f in fields(Memory)}
    assert codec.memory_from_dict(through_json(m)) == m


def test_values_are_written_as_json_spells_them():
    record = codec.memory_to_dict(FULL)
    assert record["id"] == str(FULL.id)
    assert record["scope"] == "project" and record["kind"] == "episodic"
    assert record["created_at"] == "2026-01-01T00:00:00+00:00"
    assert record["source_thread_ids"] == ["t1", "t2"]
    assert record["invalidation_reason"] == "superseded"
    assert record["supersedes"] == str(FULL.supersedes)
    assert codec.memory_to_dict(memory("x"))["key"] is None


def test_the_project_can_be_given_and_optional_fields_absent_from_older_records():
    record = through_json(FULL)
    elsewhere = uuid.uuid4()
    assert codec.memory_from_dict(record, project_id=elsewhere) == replace(
        FULL, project_id=elsewhere
    )
    del record["project_id"]  # given: the record need not hold it
    assert codec.memory_from_dict(record, project_id=elsewhere).project_id == elsewhere
    # a record written before `occurred_at` (or any field that may be None) existed
    older = {k: v for k, v in through_json(FULL).items() if k != "occurred_at"}
    assert codec.memory_from_dict(older) == replace(FULL, occurred_at=None)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("kind", "fact", "`kind` is one of topical, episodic or operational"),
        ("scope", None, "`scope` is required"),
        ("id", "not-a-uuid", "`id` is a UUID"),
        ("supersedes", 7, "`supersedes` is a UUID"),
        ("created_at", "yesterday", "`created_at` is an ISO 8601 instant"),
        ("content", 42, "`content` is a string"),
        ("pinned", "yes", "`pinned` is true or false"),
        ("pinned", 1, "`pinned` is true or false"),
        ("source_thread_ids", "t1", "`source_thread_ids` is a list"),
        ("invalidation_reason", "bored", "`invalidation_reason` is one of retired, superseded"),
    ],
)
def test_a_field_holding_what_it_cannot_is_named(field: str, value: Any, says: str):
    record = through_json(FULL)
    record[field] = value
    with pytest.raises(codec.UnreadableField) as refused:
        codec.memory_from_dict(record)
    assert refused.value.field == field
    assert str(refused.value).startswith(says)


def test_a_required_field_absent_from_the_record_is_a_key_error():
    record = through_json(FULL)
    del record["content"]
    with pytest.raises(KeyError):
        codec.memory_from_dict(record)


@pytest.mark.parametrize(
    ("name", "spelled"),
    [
        ("content", "content"),
        ("source_thread_ids", "sourceThreadIds"),
        ("occurred_at", "occurredAt"),
    ],
)
def test_domain_names_are_spelled_as_the_api_spells_them(name: str, spelled: str):
    assert codec.camel(name) == spelled


def test_an_event_snapshot_holds_what_the_save_said_with_the_api_names():
    snap = codec.snapshot(FULL)
    assert snap == {
        "id": str(FULL.id),
        "content": "Moved to Vienna.",
        "kind": "episodic",
        "scope": "project",
        "key": "home",
        "category": "moves",
        "pinned": True,
        "sourceThreadIds": ["t1", "t2"],
        "source": {"app": "chat", "nested": {"n": [1, 2.5, None]}},
        "expiresAt": str(FULL.expires_at),
        "occurredAt": str(FULL.occurred_at),
        "supersedes": str(FULL.supersedes),
    }
    # JSON-safe as it is
    assert json.loads(json.dumps(snap)) == snap
