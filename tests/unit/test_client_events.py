"""The Python client's event stream without a server: the opening message, and which refusals
it resumes from."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memql.client import SubscriberBehind
from memql.client.events import EventStream


def test_a_stream_told_it_fell_behind_resumes_from_the_cursor_the_server_gave():
    stream = EventStream({"Authorization": "Bearer k", "X-User-Id": "u"}, None, since="7")
    subscribe = json.loads(stream.opening()[1])
    assert subscribe["payload"]["variables"] == {"scope": None, "since": "7"}
    behind = {
        "type": "next",
        "id": "events",
        "payload": {
            "errors": [
                {"message": "behind", "extensions": {"code": "SUBSCRIBER_BEHIND", "since": "42"}}
            ]
        },
    }
    with pytest.raises(SubscriberBehind) as error:
        stream.receive(json.dumps(behind))
    assert stream.resumable(error.value)
    assert json.loads(stream.opening()[1])["payload"]["variables"]["since"] == "42"
    refused = {"type": "error", "id": "events", "payload": [{"extensions": {"code": "FORBIDDEN"}}]}
    with pytest.raises(Exception) as forbidden:
        stream.receive(json.dumps(refused))
    assert not stream.resumable(forbidden.value)


def test_an_event_carries_its_change_time_and_the_former_name_warns_and_gives_the_same():
    stream = EventStream({"Authorization": "Bearer k", "X-User-Id": "u"}, None, since=None)
    event = {
        "cursor": "8",
        "type": "memory.retired",
        "scope": "USER",
        "memoryId": None,
        "memory": None,
        "actorId": "u",
        "changedAt": "2026-12-02T09:30:00.123456+00:00",
    }
    message = {"type": "next", "id": "events", "payload": {"data": {"memoryEvents": event}}}
    [received], answer = stream.receive(json.dumps(message))
    assert answer is None and stream.last_cursor == "8"
    assert received.changed_at == datetime(2026, 12, 2, 9, 30, 0, 123456, tzinfo=UTC)
    with pytest.warns(DeprecationWarning, match="use `changed_at`"):
        assert received.occurred_at == received.changed_at
