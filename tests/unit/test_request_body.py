"""`http/request_body.py`: a websocket message's size is its bytes in UTF-8, whichever way the
length in characters would have it."""

from __future__ import annotations

import pytest

from memql.http.request_body import _size_over


@pytest.mark.parametrize(
    ("message", "over"),
    [
        ({"type": "websocket.receive", "bytes": b"x" * 100}, False),
        ({"type": "websocket.receive", "bytes": b"x" * 101}, True),
        ({"type": "websocket.receive", "text": "x" * 100}, False),
        ({"type": "websocket.receive", "text": "x" * 101}, True),
        ({"type": "websocket.receive", "text": "x" * 25}, False),
        # characters within the bound whose bytes are not: encoded to tell
        ({"type": "websocket.receive", "text": "é" * 50}, False),  # 100 bytes
        ({"type": "websocket.receive", "text": "é" * 51}, True),  # 102 bytes
        ({"type": "websocket.receive", "text": "€" * 34}, True),  # 102 bytes
        ({"type": "websocket.receive", "text": "😀" * 25}, False),  # 100 bytes
        ({"type": "websocket.receive"}, False),
    ],
)
def test_a_message_is_measured_in_bytes(message, over):
    assert _size_over(message, 100) is over
