"""A lean GraphQL-over-HTTP client for the benchmarks that time memql from the client's side.

The standard library's `http.client` on one keep-alive connection, called directly (the timed
requests go one at a time). httpx's async client, used before, added about 2.4 ms to each
timed recall on this 2-core machine (p50 14.1 ms against 11.7 ms from `http.client` in another
process, same server, same queries): client work the server's figures should not carry.

A benchmark whose server runs in its own process times it with `time_from_another_process`:
this file run as a script, so that the client's work is not done on the server's event loop.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import sys
import time
from pathlib import Path
from typing import Any

# uvicorn closes a keep-alive connection idle for 5 s; a connection idle this long is opened
# afresh before the next request rather than found closed
IDLE_SECONDS = 3.0
# this file, run as the client of `time_from_another_process`
SCRIPT = str(Path(__file__).resolve())


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


async def time_from_another_process(
    base: str, headers: dict[str, str], bodies: list[dict[str, Any]]
) -> list[float]:
    """Each body POSTed in turn to the server at `base` (http://127.0.0.1:<port>) by a client
    in another process: the milliseconds of each."""
    port = int(base.rsplit(":", 1)[1])
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        SCRIPT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    job = {"port": port, "headers": headers, "bodies": bodies}
    out, _ = await client.communicate(json.dumps(job).encode())
    if client.returncode != 0:
        raise RuntimeError("the client in another process failed")
    elapsed: list[float] = json.loads(out)
    return elapsed


def _run(job: dict[str, Any]) -> list[float]:
    client = GraphQLClient(job["port"])
    elapsed = []
    for body in job["bodies"]:
        started = time.perf_counter()
        status, answer = client.post(body, job["headers"])
        elapsed.append((time.perf_counter() - started) * 1000)
        if status != 200 or answer.get("errors"):
            sys.exit(f"{status} {answer}")
    client.close()
    return elapsed


if __name__ == "__main__":
    print(json.dumps(_run(json.load(sys.stdin))))
