"""Commit-to-delivery latency and throughput of memoryEvents against real `memql serve` processes.

    PYTHONPATH=src .venv/bin/python bench/realtime_latency.py [--scenarios solo,redis,rate,wide]

Scenarios (each prints one table row per run):
  solo   one instance, in-memory broadcast: 1, 1,000 and 5,000 subscribers
  redis  two instances and Redis; every subscriber on the instance that is NOT the relay
         leader, so every event crosses instances through Redis: 1, 1,000 and 5,000
  rate   one instance, 1,000 subscribers, events ever closer together: the delivery rate at
         which latency starts to grow
  wide   10,000 subscribers over 4 instances through Redis

The subscribers' client runs in separate processes (`client` sub-command), never in the
servers' or the writer's. A subscriber is one `memoryEvents(scope: PROJECT)` subscription on
graphql-transport-ws; up to 1,000 subscribers each has its own socket (its own user), above that
a socket carries `--per-socket` subscriptions (the client multiplexes to stay within one
machine; the server still executes, queues and sends each subscription's events on its own).
Events are written straight into the event log, one transaction each, one every `--interval`
seconds; latency runs from the moment COMMIT returned to the moment the client read the message
(both processes read the same monotonic clock). Deliveries/s is what reached the clients divided
by the time from the first commit to the last arrival. RSS per subscriber is the server's
resident memory after the subscribers joined, minus before, divided by their number.
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
from dataclasses import dataclass
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

QUERY = (
    "subscription($since: String) { memoryEvents(scope: PROJECT, since: $since)"
    " { cursor type memoryId occurredAt } }"
)


# --- the client process ----------------------------------------------------------------------


async def client(spec: dict[str, Any]) -> None:
    """Open the sockets of `spec`, subscribe, and record when each event reached each
    subscription; driven by lines on stdin (WARM c, EXPECT c1,c2,..) and answering on stdout."""
    arrivals: dict[int, list[float]] = {}
    sockets: list[Any] = []

    async def open_socket(url: str, user: str, count: int) -> None:
        for attempt in range(5):
            try:
                return await subscribe(url, user, count)
            except websockets.ConnectionClosedError as exc:
                # refused at connection_init (credentials not resolved in time under load):
                # a real client retries, and so does this one
                print(f"RETRY {user}: {exc}", file=sys.stderr, flush=True)
                await asyncio.sleep(1 + attempt)
        await subscribe(url, user, count)

    async def subscribe(url: str, user: str, count: int) -> None:
        ws = await websockets.connect(
            url,
            subprotocols=[websockets.Subprotocol("graphql-transport-ws")],
            open_timeout=120,
            max_queue=None,
        )
        init = {"Authorization": f"Bearer {spec['key']}", "X-User-Id": user}
        await ws.send(json.dumps({"type": "connection_init", "payload": init}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        for i in range(count):
            payload = {"query": QUERY, "variables": {"since": str(spec["since"])}}
            await ws.send(json.dumps({"id": str(i), "type": "subscribe", "payload": payload}))
        sockets.append(ws)

    async def read(ws: Any) -> None:
        async for raw in ws:
            now = time.monotonic()
            message = json.loads(raw)
            if message["type"] == "next":
                data = message["payload"].get("data")
                if data:
                    arrivals.setdefault(int(data["memoryEvents"]["cursor"]), []).append(now)
                else:
                    print(f"ERROR {message['payload']}", file=sys.stderr, flush=True)

    jobs = [
        (url, f"{spec['name']}-{n}-{s}", per)
        for n, (url, socket_count, per) in enumerate(spec["targets"])
        for s in range(socket_count)
    ]
    total = sum(per for _, _, per in jobs)
    # joins paced at ~200 subscriptions a step: each replays from `since` on a pooled connection,
    # and a herd of them would starve the credential lookups of the sockets behind them
    step = max(1, 200 // max(per for _, _, per in jobs))
    for start in range(0, len(jobs), step):
        await asyncio.gather(*(open_socket(*job) for job in jobs[start : start + step]))
        await asyncio.sleep(0.05)
    readers = [asyncio.create_task(read(ws)) for ws in sockets]
    print("SUBSCRIBED", flush=True)

    async def until_complete(cursors: list[int], within: float) -> None:
        deadline = time.monotonic() + within
        while any(len(arrivals.get(c, [])) < total for c in cursors):
            if time.monotonic() > deadline:
                return
            await asyncio.sleep(0.02)

    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            break
        command, _, argument = line.strip().partition(" ")
        if command == "WARM":
            await until_complete([int(argument)], 180)
            print(f"LIVE {len(arrivals.get(int(argument), []))}", flush=True)
        elif command == "EXPECT":
            cursors = [int(c) for c in argument.split(",")]
            await until_complete(cursors, 60)
            text = json.dumps({c: arrivals.get(c, []) for c in cursors})
            await asyncio.to_thread(Path(spec["out"]).write_text, text)
            print("DONE", flush=True)
            break
    for task in readers:
        task.cancel()
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)


# --- the controller --------------------------------------------------------------------------


@dataclass
class ClientProcess:
    proc: asyncio.subprocess.Process
    out: Path
    subscriptions: int

    @classmethod
    async def start(
        cls, workdir: Path, name: str, key: str, since: int, targets: list[tuple[str, int, int]]
    ) -> ClientProcess:
        out = workdir / f"arrivals-{name}-{uuid.uuid4().hex[:6]}.json"
        spec = {"name": name, "key": key, "since": since, "targets": targets, "out": str(out)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "client", json.dumps(spec),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(proc, out, sum(n * per for _, n, per in targets))

    async def expect_line(self, prefix: str, within: float = 600) -> str:
        assert self.proc.stdout is not None
        while True:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), within)
            if not raw:
                raise RuntimeError(f"the client ended before {prefix}")
            line = raw.decode().strip()
            if line.startswith(prefix):
                return line

    async def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line + "\n").encode())
        await self.proc.stdin.drain()

    async def arrivals(self) -> dict[int, list[float]]:
        await self.expect_line("DONE", 120)
        await self.proc.wait()
        text = await asyncio.to_thread(self.out.read_text)
        return {int(c): t for c, t in json.loads(text).items()}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


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


def layout(subscribers: int, per_socket: int) -> tuple[int, int]:
    """(sockets, subscriptions per socket): a socket each up to 1,000 subscribers."""
    if subscribers <= 1000:
        return subscribers, 1
    return -(-subscribers // per_socket), per_socket


async def measure(
    label: str,
    database_url: str,
    tenant: Any,
    instances: list[Instance],
    subscribers: int,
    events: int,
    interval: float,
    per_socket: int,
    workdir: Path,
    clients_per_instance: int = 1,
) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("select coalesce(max(cursor), 0) from memory_events")
        row = await cur.fetchone()
        assert row is not None
    # every subscriber replays from here, so the warm-up event reaches it however late it joins
    since = int(row[0])
    rss_before = {i.name: rss_mb(i.proc.pid) for i in instances}
    share = subscribers // len(instances)
    sockets, per = layout(share, per_socket)
    clients = []
    for instance in instances:
        ws = instance.url.replace("http://", "ws://") + "/graphql"
        for c in range(clients_per_instance):
            mine = sockets // clients_per_instance + (c < sockets % clients_per_instance)
            clients.append(
                await ClientProcess.start(
                    workdir, f"{instance.name}c{c}", tenant.key, since, [(ws, mine, per)]
                )
            )
    total = sum(c.subscriptions for c in clients)
    try:
        for c in clients:
            await c.expect_line("SUBSCRIBED")
        warm, _ = await write_event(database_url, tenant.project_id)
        for c in clients:
            await c.send(f"WARM {warm}")
        live = [int((await c.expect_line("LIVE")).split()[1]) for c in clients]
        if sum(live) < total:
            raise RuntimeError(f"only {sum(live)} of {total} subscriptions are live")
        rss_after = {i.name: rss_mb(i.proc.pid) for i in instances}
        commits: dict[int, float] = {}
        started = time.monotonic()
        for n in range(events):
            cursor, committed = await write_event(database_url, tenant.project_id)
            commits[cursor] = committed
            # a steady rate, whatever a write costs
            await asyncio.sleep(max(0.0, started + (n + 1) * interval - time.monotonic()))
        expected = ",".join(str(c) for c in commits)
        for c in clients:
            await c.send(f"EXPECT {expected}")
        arrivals: dict[int, list[float]] = {}
        for c in clients:
            for cursor, times in (await c.arrivals()).items():
                arrivals.setdefault(cursor, []).extend(times)
    finally:
        for c in clients:
            if c.proc.returncode is None:
                c.proc.kill()
                await c.proc.wait()
    latencies = sorted((t - commits[c]) * 1000 for c in commits for t in arrivals.get(c, []))
    delivered = len(latencies)
    last = max((max(t) for t in arrivals.values() if t), default=started)
    first = min(commits.values())
    q = statistics.quantiles(latencies, n=100, method="inclusive") if delivered > 1 else [0] * 99
    grown = sum(rss_after[i.name] - rss_before[i.name] for i in instances)
    return {
        "scenario": label,
        "subscribers": total,
        "sockets": sockets * len(instances),
        "interval": interval,
        "deliveries": f"{delivered}/{events * total}",
        "per_s": round(delivered / max(last - first, 1e-9)),
        "p50_ms": round(statistics.median(latencies), 1),
        "p99_ms": round(q[98], 1),
        "max_ms": round(latencies[-1], 1),
        "rss_kb": round(grown * 1024 / total, 1),
    }


async def leader_last(instances: list[Instance]) -> list[Instance]:
    """The instances, the relay leader last."""
    states = [await i.readyz() for i in instances]
    return sorted(instances, key=lambda i: states[instances.index(i)]["relay"] == "leader")


def show(r: dict[str, Any]) -> None:
    print(
        f"| {r['scenario']} | {r['subscribers']} | {r['sockets']} | {r['interval']}"
        f" | {r['deliveries']} | {r['per_s']} | {r['p50_ms']} | {r['p99_ms']} | {r['max_ms']}"
        f" | {r['rss_kb']} |",
        flush=True,
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", default="solo,redis,rate,wide")
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--per-socket", type=int, default=10)
    parser.add_argument("--counts", default="1,1000,5000")
    parser.add_argument("--rates", default="0.1,0.05,0.033,0.025,0.02")
    parser.add_argument("--wide", type=int, default=10000)
    parser.add_argument("--wide-interval", type=float, default=0.5)
    args = parser.parse_args()
    scenarios = set(args.scenarios.split(","))
    counts = [int(c) for c in args.counts.split(",")]

    workdir = Path(tempfile.mkdtemp(prefix="memql-bench-"))
    database_url = await asyncio.to_thread(start_embedded, workdir / "db")
    await migrate(database_url)
    tenant = await make_tenant(database_url)
    print(
        "| scenario | subscribers | sockets | interval s | deliveries | deliveries/s | p50 ms"
        " | p99 ms | max ms | server RSS KB/subscriber |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)

    def run(label: str, instances: list[Instance], n: int, interval: float, **kw: Any) -> Any:
        return measure(
            label, database_url, tenant, instances, n, args.events, interval, args.per_socket,
            workdir, **kw,
        )  # fmt: skip

    if scenarios & {"solo", "rate"}:
        solo = Instance(database_url, "", workdir, "solo")
        try:
            await solo.ready()
            if "solo" in scenarios:
                for n in counts:
                    show(await run("one instance", [solo], n, args.interval))
            if "rate" in scenarios:
                for interval in (float(r) for r in args.rates.split(",")):
                    show(await run("one instance, rate", [solo], 1000, interval))
        finally:
            solo.stop()

    if scenarios & {"redis", "wide"}:
        redis = RedisProcess(workdir)
        group: list[Instance] = []
        try:
            redis.start()
            size = 4 if "wide" in scenarios else 2
            group = [Instance(database_url, redis.url, workdir, f"r{n}") for n in range(size)]
            await asyncio.gather(*(i.ready() for i in group))
            await asyncio.sleep(1.0)
            ordered = await leader_last(group)
            if "redis" in scenarios:
                for n in counts:
                    show(await run("through Redis", ordered[:1], n, args.interval))
            if "wide" in scenarios:
                show(
                    await run("through Redis, 4 instances", ordered, args.wide, args.wide_interval)
                )
        finally:
            for instance in group:
                instance.stop()
            redis.stop()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "client":
        asyncio.run(client(json.loads(sys.argv[2])))
    else:
        asyncio.run(main())
