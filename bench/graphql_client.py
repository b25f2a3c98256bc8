"""A lean GraphQL-over-HTTP client for the benchmarks that time memql from the client's side.

The standard library's `http.client` on one keep-alive connection, called directly (the timed
requests go one at a time). httpx's async client, used before, added about 2.4 ms to each
timed recall on this 2-core machine (p50 14.1 ms against 11.7 ms from `http.client` in another
process, same server, same queries): client work the server's figures should not carry.
"""

from __future__ import annotations

import http.client
import json
from typing import Any


class GraphQLClient:
    def __init__(self, port: int, timeout: float = 120) -> None:
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """POST `body` to /graphql: the status and the decoded answer."""
        self._conn.request(
            "POST",
            "/graphql",
            body=json.dumps(body),
            headers={**headers, "Content-Type": "application/json"},
        )
        response = self._conn.getresponse()
        return response.status, dict(json.loads(response.read()))

    def close(self) -> None:
        self._conn.close()
