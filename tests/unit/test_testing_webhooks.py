"""The hostile receiver shipped for tests and benchmarks closes without noise: stopping it
while a sender is still connected reports no exception from the event loop."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from memql.testing import dribbling_receiver


async def test_stopping_it_with_a_sender_connected_reports_nothing():
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        async with dribbling_receiver(0.01) as dribbler:
            address = urlsplit(dribbler.url)
            reader, writer = await asyncio.open_connection(address.hostname, address.port)
            writer.write(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            assert (await reader.readexactly(24)).startswith(b"HTTP/1.1 200 OK")
            assert len(dribbler.open()) == 1
        # the callbacks of the cancelled connection run on the next turns of the loop
        for _ in range(5):
            await asyncio.sleep(0)
        writer.close()
    finally:
        loop.set_exception_handler(previous)
    assert reported == []
