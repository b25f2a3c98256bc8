"""A lean GraphQL-over-HTTP client for the benchmarks that time memql from the client's side.

The standard library's `http.client` on one keep-alive connection, called directly (the timed
requests go one at a time). httpx's async client, used before, added about 2.4 ms to each
timed recall on this 2-core machine (p50 14.1 ms against 11.7 ms from `http.client` in another
process, same server, same queries): client work the server's figures should not carry.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

# uvicorn closes a keep-alive connection idle for 5 s; a connection idle this long is opened
# afresh before the next request rather than found closed
IDLE_SECONDS = 3.0


class GraphQLClient:
    def __init__(self, port: int, timeout: float = 120) -> None:
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self._used = time.monotonic()

    def post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """POST `body` to /graphql: the status and the decoded answer."""
        if time.monotonic() - self._used > IDLE_SECONDS:
            self._conn.close()  # the next request opens a new connection
        self._conn.request(
            "POST",
            "/graphql",
            body=json.dumps(body),
            headers={**headers, "Content-Type": "application/json"},
        )
        response = self._conn.getresponse()
        answer = response.read()
        self._used = time.monotonic()
        return response.status, dict(json.loads(answer))

    def close(self) -> None:
        self._conn.close()
