"""Commit-to-delivery latency of memoryEvents, measured against real `memql serve` processes.

    .venv/bin/python bench/realtime_latency.py [--subscribers 1000] [--events 40]

Scenarios:
  memory   one instance, in-memory broadcast; all subscribers on it
  redis    two instances and Redis; all subscribers on the instance that is NOT the relay
           leader, so every event crosses instances through Redis

Every subscriber is its own websocket (graphql-transport-ws) as a different user of one
project, subscribed to project-scope events, so each event reaches every subscriber. Events are
written straight into the event log (one transaction each, like a write's), one every
`--interval` seconds; latency is from the moment COMMIT returned to the moment a subscriber's
client read the message. The client and the servers share the machine, so the figures include
the client's own time to read 1,000 sockets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Instance, RedisProcess  # noqa: E402
from tests.conftest import make_tenant  # noqa: E402

from memql.db.embedded import start_embedded  # noqa: E402
from memql.db.migrate import migrate  # noqa: E402

QUERY = "subscription($since: String) { memoryEvents(scope: PROJECT, since: $since) { cursor } }"


class Subscriber:
    def __init__(
        self, url: str, key: str, user: str, since: int, arrivals: dict[int, list[float]]
    ) -> None:
        self.url, self.key, self.user, self.arrivals = url, key, user, arrivals
        self.since = since
        self.ws: Any = None

    async def open(self) -> None:
        self.ws = await websockets.connect(
            self.url,
            subprotocols=[websockets.Subprotocol("graphql-transport-ws")],
            open_timeout=60,
        )
        init = {"Authorization": f"Bearer {self.key}", "X-User-Id": self.user}
        await self.ws.send(json.dumps({"type": "connection_init", "payload": init}))
        assert json.loads(await self.ws.recv())["type"] == "connection_ack"
        await self.ws.send(
            json.dumps(
                {
                    "id": "1",
                    "type": "subscribe",
                    "payload": {"query": QUERY, "variables": {"since": str(self.since)}},
                }
            )
        )

    async def run(self) -> None:
        async for raw in self.ws:
            now = time.monotonic()
            message = json.loads(raw)
            if message["type"] == "next":
                cursor = int(message["payload"]["data"]["memoryEvents"]["cursor"])
                self.arrivals.setdefault(cursor, []).append(now)


async def write_event(url: str, project_id: uuid.UUID) -> tuple[int, float]:
    """One project-scope event in its own transaction; the cursor and when COMMIT returned."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "with tx as materialized (select pg_current_xact_id() as xid)"
            " insert into memory_events (project_id, scope, owner_id, type, actor_id)"
            " select %s, 'project', '', 'memory.retired', 'bench' from tx"
            " where tx.xid is not null returning cursor",
            (project_id,),
        )
        row = await cur.fetchone()
        assert row is not None
        await conn.commit()
        return int(row[0]), time.monotonic()


async def measure(
    label: str,
    database_url: str,
    ws_url: str,
    project_id: uuid.UUID,
    key: str,
    subscribers: int,
    events: int,
    interval: float,
) -> dict[str, Any]:
    arrivals: dict[int, list[float]] = {}
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("select coalesce(max(cursor), 0) from memory_events")
        row = await cur.fetchone()
        assert row is not None
    # each subscriber replays from here, so the warm-up event reaches it however late it joins
    since = int(row[0])
    subs = [Subscriber(ws_url, key, f"user-{i}", since, arrivals) for i in range(subscribers)]
    for start in range(0, subscribers, 100):
        await asyncio.gather(*(s.open() for s in subs[start : start + 100]))
    readers = [asyncio.create_task(s.run()) for s in subs]
    try:
        # warm-up: every subscriber is live once it has this event
        warm, _ = await write_event(database_url, project_id)
        deadline = time.monotonic() + 60
        while len(arrivals.get(warm, [])) < subscribers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(arrivals.get(warm, []))} subscribers are live")
            await asyncio.sleep(0.05)
        commits: dict[int, float] = {}
        for _ in range(events):
            cursor, committed = await write_event(database_url, project_id)
            commits[cursor] = committed
            await asyncio.sleep(interval)
        deadline = time.monotonic() + 60
        while any(len(arrivals.get(c, [])) < subscribers for c in commits):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
    finally:
        for task in readers:
            task.cancel()
        await asyncio.gather(*(s.ws.close() for s in subs), return_exceptions=True)
    latencies = sorted((t - commits[c]) * 1000 for c in commits for t in arrivals.get(c, []))
    delivered = len(latencies)
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "scenario": label,
        "subscribers": subscribers,
        "events": events,
        "deliveries": f"{delivered}/{events * subscribers}",
        "p50_ms": round(statistics.median(latencies), 1),
        "p99_ms": round(q[98], 1),
        "max_ms": round(latencies[-1], 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.25)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memql-bench-"))
    database_url = await asyncio.to_thread(start_embedded, workdir / "db")
    await migrate(database_url)
    tenant = await make_tenant(database_url)

    results = []
    # one instance, in-memory broadcast
    solo = Instance(database_url, "", workdir, "solo")
    try:
        await solo.ready()
        ws = solo.url.replace("http://", "ws://") + "/graphql"
        for n in (1, args.subscribers):
            results.append(
                await measure(
                    "memory, one instance", database_url, ws, tenant.project_id, tenant.key,
                    n, args.events, args.interval,
                )
            )  # fmt: skip
    finally:
        solo.stop()

    # two instances through Redis; subscribers on the standby, the relay on the leader
    redis = RedisProcess(workdir)
    pair: list[Instance] = []
    try:
        redis.start()
        pair = [Instance(database_url, redis.url, workdir, n) for n in ("r1", "r2")]
        await asyncio.gather(*(i.ready() for i in pair))
        await asyncio.sleep(1.0)
        states = [await i.readyz() for i in pair]
        standby = pair[0] if states[0]["relay"] == "standby" else pair[1]
        ws = standby.url.replace("http://", "ws://") + "/graphql"
        for n in (1, args.subscribers):
            results.append(
                await measure(
                    "Redis, across instances", database_url, ws, tenant.project_id,
                    tenant.key, n, args.events, args.interval,
                )
            )  # fmt: skip
    finally:
        for instance in pair:
            instance.stop()
        redis.stop()

    print("| scenario | subscribers | deliveries | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['scenario']} | {r['subscribers']} | {r['deliveries']} | {r['p50_ms']}"
            f" | {r['p99_ms']} | {r['max_ms']} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
