"""Request bodies: a size limit on every HTTP route, and JSON decoding that fails as bad input
(never as a crash).

Python's `json` raises RecursionError on deeply nested input and ValueError on integers longer
than `sys.get_int_max_str_digits()`; both are turned into `UnreadableJson`, a JSONDecodeError,
so every caller that handles malformed JSON handles these too.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memql.http.errors import error_response


class UnreadableJson(json.JSONDecodeError):
    """JSON that is too large, too deep or holds a number Python will not convert."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "", 0)
        self.msg = message


def decode(data: str | bytes, *, max_bytes: int) -> Any:
    """`json.loads`, bounded: larger than `max_bytes`, nested past the interpreter's recursion
    limit or holding an overlong integer raises UnreadableJson."""
    if len(data) > max_bytes:
        raise UnreadableJson(f"the message is larger than {max_bytes} bytes")
    try:
        return json.loads(data)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise UnreadableJson("the JSON is nested too deeply") from None
    except ValueError as exc:  # an integer with more digits than Python converts
        raise UnreadableJson(f"the JSON holds a number that cannot be read: {exc}") from None


class BodyLimit:
    """ASGI middleware: an HTTP request body larger than `max_bytes` is answered 413 before the
    app sees it. The body is read whole first (it is at most `max_bytes`), so an app that fails
    halfway through reading never has to.

    A request without an `Authorization` header can do nothing that needs a large body (a
    GraphQL document is at most MEMQL_MAX_DOCUMENT_BYTES, and without credentials nothing is
    written), so its body is held to `anonymous_max_bytes`: a megabyte sent by anyone costs
    the server no decoding and no memory, refused by its declared length before it is read.

    A websocket's messages are held to the same bounds: its first one, sent before any
    credential is checked (`connection_init`, whose payload holds the credentials: a
    websocket's upgrade carries none), to `anonymous_max_bytes`; every one to `max_bytes`. A
    message over its bound closes the socket with 1009 (message too big) before the app reads
    it."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, anonymous_max_bytes: int | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.anonymous_max_bytes = min(anonymous_max_bytes or max_bytes, max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        limit, why = self.max_bytes, LARGER
        if "authorization" not in headers:
            limit, why = self.anonymous_max_bytes, ANONYMOUS_LARGER
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, why.format(limit=limit))
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._refuse(scope, receive, send, why.format(limit=limit))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # what follows the body: a disconnect
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        received = 0

        async def bounded() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] != "websocket.receive":
                return message
            limit, why = (
                (self.anonymous_max_bytes, FIRST_MESSAGE_LARGER)
                if received == 0
                else (self.max_bytes, MESSAGE_LARGER)
            )
            received += 1
            if _size_over(message, limit):
                reason = why.format(limit=limit)
                await send({"type": "websocket.close", "code": TOO_BIG, "reason": reason})
                return {"type": "websocket.disconnect", "code": TOO_BIG}
            return message

        await self.app(scope, bounded, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, message: str) -> None:
        # the rest of the body is read and dropped (nothing is kept): a client still sending
        # when the answer comes would see a reset connection instead of the 413
        while True:
            received = await receive()
            if received["type"] == "http.disconnect" or not received.get("more_body", False):
                break
        await error_response(413, message)(scope, receive, send)


def _size_over(message: Message, limit: int) -> bool:
    """Whether a websocket message holds more than `limit` bytes. A text frame is encoded only
    when its length in characters (1 to 4 bytes each in UTF-8) does not settle it."""
    text = message.get("text")
    if text is None:
        return len(message.get("bytes") or b"") > limit
    if len(text) > limit or 4 * len(text) <= limit:
        return len(text) > limit
    return len(text.encode()) > limit


# a websocket message over its bound: the close code (RFC 6455) and its reasons (at most 123
# bytes, as a close frame holds)
TOO_BIG = 1009
FIRST_MESSAGE_LARGER = "a first message (connection_init) may hold at most {limit} bytes"
MESSAGE_LARGER = "a message may hold at most {limit} bytes (MEMQL_MAX_BODY_BYTES)"
LARGER = "the request body is larger than {limit} bytes (MEMQL_MAX_BODY_BYTES)"
ANONYMOUS_LARGER = (
    "a request without credentials may send at most {limit} bytes (twice"
    " MEMQL_MAX_DOCUMENT_BYTES); send `Authorization` for a larger body"
)
