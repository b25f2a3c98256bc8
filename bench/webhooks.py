"""Webhook delivery against a real `memql serve` process and a real HTTP receiver.

    .venv/bin/python bench/webhooks.py [--events 200] [--interval 0.1] [--down 60]

1. Latency: one endpoint; events are written straight into the event log (one transaction
   each, like a write's), one every `--interval` seconds; latency runs from the moment COMMIT
   returned to the moment the receiver (in this process) read the POST.
2. Recovery: the receiver goes down (its port closed) for `--down` seconds while events keep
   coming (5 a second), then comes back on the same port. Reported: how long after it came back
   the first and the last missed event arrived, and whether every event arrived, in cursor
   order, with nothing skipped. The server runs with the default backoff (1 s doubling to 60 s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from memql.db.pool import owner_connection
from memql.runtime import open_database
from memql.service import webhooks as registry
from memql.settings import Settings
from memql.testing import (
    Receiver,
    ServeProcess,
    free_port,
    log_event,
    make_tenant,
    webhook_receiver,
)


async def add_endpoint(url: str, project_id: uuid.UUID, target: str) -> None:
    async with await owner_connection(url) as conn:
        await registry.register(
            conn, project_id, target, None, created_by="bench", allow_private=True
        )
        await conn.commit()


async def wait_for(receiver: Receiver, cursors: list[int], within: float) -> None:
    deadline = time.monotonic() + within
    while not set(cursors) <= {r.cursor for r in receiver.accepted()}:
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(0.02)


def in_order_once(receiver: Receiver, expected: list[int]) -> bool:
    accepted = [r.cursor for r in receiver.accepted()]
    collapsed = [c for i, c in enumerate(accepted) if i == 0 or accepted[i - 1] != c]
    return collapsed == expected


async def latency(url: str, project_id: uuid.UUID, events: int, interval: float) -> None:
    async with webhook_receiver() as receiver:
        await add_endpoint(url, project_id, f"{receiver.url}/latency")
        warm, _ = await log_event(url, project_id)
        await wait_for(receiver, [warm], 30)
        receiver.requests.clear()
        commits: dict[int, float] = {}
        for _ in range(events):
            cursor, committed = await log_event(url, project_id)
            commits[cursor] = committed
            await asyncio.sleep(interval)
        await wait_for(receiver, list(commits), 60)
    first: dict[int, float] = {}
    for r in receiver.attempts():
        first.setdefault(r.cursor, r.at)
    latencies = sorted((first[c] - commits[c]) * 1000 for c in commits if c in first)
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    print("| events | delivered | in order, once | p50 ms | p95 ms | max ms |")
    print("|---:|---:|---|---:|---:|---:|")
    print(
        f"| {events} | {len(latencies)} | {in_order_once(receiver, sorted(commits))}"
        f" | {statistics.median(latencies):.1f} | {q[94]:.1f} | {latencies[-1]:.1f} |"
    )


async def recovery(url: str, project_id: uuid.UUID, down: float) -> None:
    port = free_port()
    receiver = Receiver(url=f"http://127.0.0.1:{port}")
    async with webhook_receiver(port, receiver):
        await add_endpoint(url, project_id, f"{receiver.url}/recovery")
        before, _ = await log_event(url, project_id)
        await wait_for(receiver, [before], 30)
    # the receiver is down: its port is closed
    went_down = time.monotonic()
    missed: list[int] = []
    while time.monotonic() - went_down < down:
        cursor, _ = await log_event(url, project_id)
        missed.append(cursor)
        await asyncio.sleep(0.2)
    async with webhook_receiver(port, receiver):
        back = time.monotonic()
        await wait_for(receiver, missed, 180)
        await asyncio.sleep(1.0)
    arrivals = {r.cursor: r.at for r in receiver.accepted()}
    got = [c for c in missed if c in arrivals]
    print("| down s | events while down | delivered | in order, once | first after back s |"
          " all after back s |")  # fmt: skip
    print("|---:|---:|---:|---|---:|---:|")
    print(
        f"| {down:g} | {len(missed)} | {len(got)} | {in_order_once(receiver, [before, *missed])}"
        f" | {min(arrivals[c] for c in got) - back:.2f}"
        f" | {max(arrivals[c] for c in got) - back:.2f} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--down", type=float, default=60.0)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memql-bench-"))
    os.environ["MEMQL_WEBHOOKS_ALLOW_PRIVATE"] = "true"
    async with open_database(Settings(data_dir=workdir / "db")) as database_url:
        server = ServeProcess.on_database(database_url, workdir, "hooks")
        try:
            await server.ready()
            deadline = time.monotonic() + 30
            while (await server.readyz())["webhooks"]["role"] != "leader":
                assert time.monotonic() < deadline, "the deliverer did not lead"
                await asyncio.sleep(0.1)
            await latency(database_url, (await make_tenant(database_url)).project_id,
                          args.events, args.interval)  # fmt: skip
            print()
            await recovery(database_url, (await make_tenant(database_url)).project_id, args.down)
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
