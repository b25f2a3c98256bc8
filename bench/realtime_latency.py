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
import base64
import functools
import json
import os
import statistics
import struct
import sys
import tempfile
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memql.db.pool import owner_connection
from memql.runtime import open_database
from memql.settings import Settings
from memql.testing import RedisProcess, ServeProcess, log_event, make_tenant, newest_cursor

QUERY = (
    "subscription($since: String) { memoryEvents(scope: PROJECT, since: $since)"
    " { cursor type memoryId changedAt } }"
)


# --- the client process ----------------------------------------------------------------------


class _Socket(asyncio.Protocol):
    """One graphql-transport-ws connection read as cheaply as Python allows: the client shares
    the machine with the servers, so each message costs a frame-header parse and a search for
    its cursor, not a websocket library's machinery and a JSON decode.

    Server frames are unmasked; the few frames the client sends are masked as RFC 6455 asks.
    """

    def __init__(
        self, host: str, path: str, init: dict[str, str], payloads: list[str], deflate: bool
    ) -> None:
        # a browser offers per-message compression; the server decides
        offer = "Sec-WebSocket-Extensions: permessage-deflate\r\n" if deflate else ""
        self._request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n"
            f"Sec-WebSocket-Protocol: graphql-transport-ws\r\n{offer}\r\n"
        ).encode()
        self._inflate: Any = None
        self._init = json.dumps({"type": "connection_init", "payload": init})
        self._payloads = payloads
        self._buffer = b""
        self._upgraded = False
        self.transport: asyncio.Transport | None = None
        self.acked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # (cursor, monotonic time read) per `next` message, in arrival order
        self.arrivals: list[tuple[int, float]] = []
        self.messages = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self._request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.acked.done():
            self.acked.set_exception(ConnectionError(f"closed before connection_ack: {exc}"))

    def send(self, text: str | bytes, opcode: int = 1) -> None:
        assert self.transport is not None
        payload = text.encode() if isinstance(text, str) else text
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        mask = os.urandom(4)
        key = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
        masked = (int.from_bytes(payload, "big") ^ key).to_bytes(n, "big")
        self.transport.write(header + mask + masked)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        buffer = self._buffer + data if self._buffer else data
        if not self._upgraded:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self._buffer = buffer
                return
            if not buffer.startswith(b"HTTP/1.1 101"):
                self.acked.set_exception(ConnectionError(buffer[:end].decode("latin-1")))
                return
            self._upgraded = True
            if b"permessage-deflate" in buffer[:end].lower():
                # with context takeover, one decompressor for the connection's messages
                self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            buffer = buffer[end + 4 :]
            self.send(self._init)
        at, size = 0, len(buffer)
        while size - at >= 2:
            first, second = buffer[at], buffer[at + 1] & 0x7F
            start = at + 2
            if second == 126:
                if size - at < 4:
                    break
                second = int.from_bytes(buffer[at + 2 : at + 4], "big")
                start = at + 4
            elif second == 127:
                if size - at < 10:
                    break
                second = int.from_bytes(buffer[at + 2 : at + 10], "big")
                start = at + 10
            end = start + second
            if end > size:
                break
            payload = buffer[start:end]
            if first & 0x40 and self._inflate is not None:  # RSV1: a compressed message
                payload = self._inflate.decompress(payload + b"\x00\x00\xff\xff")
            self._frame(first & 0x0F, payload, now)
            at = end
        self._buffer = buffer[at:]

    def _frame(self, opcode: int, payload: bytes, now: float) -> None:
        if opcode == 1:
            found = payload.find(b'"cursor":"')
            if found >= 0 and b'"type":"next"' in payload:
                start = found + 10
                cursor = int(payload[start : payload.index(b'"', start)])
                self.arrivals.append((cursor, now))
                self.messages += 1
            elif b'"connection_ack"' in payload:
                for text in self._payloads:
                    self.send(text)
                self.acked.set_result(None)
            elif b'"ping"' in payload:
                self.send('{"type":"pong"}')
            else:
                print(f"UNEXPECTED {payload[:300]!r}", file=sys.stderr, flush=True)
        elif opcode == 9:  # ping: pong with the same data, or the server drops the socket
            self.send(payload, 0xA)
        elif opcode == 8:
            if not self.acked.done():
                self.acked.set_exception(ConnectionError(f"closed: {payload!r}"))
            else:
                print(f"CLOSED {payload[:200]!r}", file=sys.stderr, flush=True)


async def client(spec: dict[str, Any]) -> None:
    """Open the sockets of `spec`, subscribe, and record when each event reached each
    subscription; driven by lines on stdin (WARM c, EXPECT c1,c2,..) and answering on stdout."""
    loop = asyncio.get_running_loop()
    sockets: list[_Socket] = []

    async def open_socket(url: str, user: str, count: int) -> None:
        for attempt in range(5):
            try:
                return await subscribe(url, user, count)
            except ConnectionError as exc:
                # refused at connection_init (credentials not resolved in time under load):
                # a real client retries, and so does this one
                print(f"RETRY {user}: {exc}", file=sys.stderr, flush=True)
                await asyncio.sleep(1 + attempt)
        await subscribe(url, user, count)

    async def subscribe(url: str, user: str, count: int) -> None:
        parts = urlsplit(url)
        init = {"Authorization": f"Bearer {spec['key']}", "X-User-Id": user}
        variables = {"since": str(spec["since"])}
        payloads = [
            json.dumps(
                {"id": str(i), "type": "subscribe",
                 "payload": {"query": QUERY, "variables": variables}}
            )
            for i in range(count)
        ]  # fmt: skip
        _, socket = await loop.create_connection(
            lambda: _Socket(parts.netloc, parts.path, init, payloads, spec["deflate"]),
            parts.hostname,
            parts.port,
        )
        try:
            await asyncio.wait_for(socket.acked, 120)
        except BaseException:
            assert socket.transport is not None
            socket.transport.abort()
            raise
        sockets.append(socket)

    def count(cursor: int) -> int:
        return sum(1 for s in sockets for c, _ in s.arrivals if c == cursor)

    def arrived(cursor: int) -> bool:
        return count(cursor) >= total

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
    print("SUBSCRIBED", flush=True)

    def complete(cursors: list[int]) -> bool:
        # the message count first: counting per cursor is for when it looks complete
        if sum(s.messages for s in sockets) - baseline < total * len(cursors):
            return False
        counts = Counter(c for s in sockets for c, _ in s.arrivals)
        return all(counts[c] >= total for c in cursors)

    async def until(done: Callable[[], bool], within: float) -> None:
        deadline = time.monotonic() + within
        # polled: the readers' counts change with every frame, an event per frame would cost more
        while not done() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)

    baseline, cpu = 0, 0.0
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            break
        command, _, argument = line.strip().partition(" ")
        if command == "WARM":
            # the replay (if any) and the warm-up event
            warm = int(argument)
            await until(functools.partial(arrived, warm), 180)
            print(f"LIVE {count(warm)}", flush=True)
            baseline = sum(s.messages for s in sockets)
            cpu = time.process_time()
        elif command == "EXPECT":
            cursors = [int(c) for c in argument.split(",")]
            await until(functools.partial(complete, cursors), 60)
            cpu = time.process_time() - cpu
            wanted = set(cursors)
            arrivals: dict[int, list[float]] = {c: [] for c in cursors}
            for s in sockets:
                for c, t in s.arrivals:
                    if c in wanted:
                        arrivals[c].append(t)
            text = json.dumps({"arrivals": arrivals, "cpu": cpu})
            await asyncio.to_thread(Path(spec["out"]).write_text, text)
            print("DONE", flush=True)
            break
    for s in sockets:
        if s.transport is not None:
            s.transport.close()


# --- the controller --------------------------------------------------------------------------


@dataclass
class ClientProcess:
    proc: asyncio.subprocess.Process
    out: Path
    subscriptions: int

    @classmethod
    async def start(
        cls,
        workdir: Path,
        name: str,
        key: str,
        since: int,
        targets: list[tuple[str, int, int]],
        deflate: bool,
    ) -> ClientProcess:
        out = workdir / f"arrivals-{name}-{uuid.uuid4().hex[:6]}.json"
        spec = {
            "name": name, "key": key, "since": since, "targets": targets, "out": str(out),
            "deflate": deflate,
        }  # fmt: skip
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

    async def arrivals(self) -> tuple[dict[int, list[float]], float]:
        """When each event reached each subscription, and the CPU seconds the client spent
        reading them."""
        await self.expect_line("DONE", 120)
        await self.proc.wait()
        report = json.loads(await asyncio.to_thread(self.out.read_text))
        return {int(c): t for c, t in report["arrivals"].items()}, float(report["cpu"])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (/proc/PID/stat, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def layout(subscribers: int, per_socket: int) -> tuple[int, int]:
    """(sockets, subscriptions per socket): a socket each up to 1,000 subscribers."""
    if subscribers <= 1000:
        return subscribers, 1
    return -(-subscribers // per_socket), per_socket


async def measure(
    label: str,
    database_url: str,
    tenant: Any,
    instances: list[ServeProcess],
    subscribers: int,
    events: int,
    interval: float,
    per_socket: int,
    workdir: Path,
    clients_per_instance: int = 1,
    deflate: bool = True,
) -> dict[str, Any]:
    async with await owner_connection(database_url) as conn:
        since = await newest_cursor(conn, tenant.project_id)
    # every subscriber replays from here, so the warm-up event reaches it however late it joins
    rss_before = {i.name: rss_mb(i.proc.pid) for i in instances}
    share = subscribers // len(instances)
    sockets, per = layout(share, per_socket)
    clients = []
    for instance in instances:
        ws = instance.url.replace("http://", "ws://") + "/graphql"
        for c in range(clients_per_instance):
            mine = sockets // clients_per_instance + (c < sockets % clients_per_instance)
            if not mine:
                continue
            clients.append(
                await ClientProcess.start(
                    workdir, f"{instance.name}c{c}", tenant.key, since, [(ws, mine, per)], deflate
                )
            )
    total = sum(c.subscriptions for c in clients)
    try:
        for c in clients:
            await c.expect_line("SUBSCRIBED")
        warm, _ = await log_event(database_url, tenant.project_id)
        for c in clients:
            await c.send(f"WARM {warm}")
        live = [int((await c.expect_line("LIVE")).split()[1]) for c in clients]
        if sum(live) < total:
            raise RuntimeError(f"only {sum(live)} of {total} subscriptions are live")
        rss_after = {i.name: rss_mb(i.proc.pid) for i in instances}
        commits: dict[int, float] = {}
        cpu_before = {i.name: cpu_seconds(i.proc.pid) for i in instances}
        started = time.monotonic()
        for n in range(events):
            cursor, committed = await log_event(database_url, tenant.project_id)
            commits[cursor] = committed
            # a steady rate, whatever a write costs
            await asyncio.sleep(max(0.0, started + (n + 1) * interval - time.monotonic()))
        expected = ",".join(str(c) for c in commits)
        for c in clients:
            await c.send(f"EXPECT {expected}")
        arrivals: dict[int, list[float]] = {}
        client_cpu = 0.0
        for c in clients:
            got, spent = await c.arrivals()
            client_cpu += spent
            for cursor, times in got.items():
                arrivals.setdefault(cursor, []).extend(times)
        server_cpu = sum(cpu_seconds(i.proc.pid) - cpu_before[i.name] for i in instances)
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
        # CPU per delivery while the events flowed: every instance's (relay and Redis included)
        # and the client's, each over the deliveries made
        "server_us": round(server_cpu * 1e6 / max(delivered, 1), 1),
        "client_us": round(client_cpu * 1e6 / max(delivered, 1), 1),
    }


async def leader_last(instances: list[ServeProcess]) -> list[ServeProcess]:
    """The instances, the relay leader last."""
    states = [await i.readyz() for i in instances]
    return sorted(instances, key=lambda i: states[instances.index(i)]["relay"] == "leader")


def show(r: dict[str, Any]) -> None:
    print(
        f"| {r['scenario']} | {r['subscribers']} | {r['sockets']} | {r['interval']}"
        f" | {r['deliveries']} | {r['per_s']} | {r['p50_ms']} | {r['p99_ms']} | {r['max_ms']}"
        f" | {r['rss_kb']} | {r['server_us']} | {r['client_us']} |",
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
    parser.add_argument(
        "--no-deflate",
        dest="deflate",
        action="store_false",
        help="do not offer per-message compression (browsers offer it)",
    )
    parser.add_argument(
        "--clients", type=int, default=1, help="client processes per instance (sockets split)"
    )
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memql-bench-"))
    async with open_database(Settings(data_dir=workdir / "db")) as database_url:
        await scenarios_on(database_url, workdir, args)


async def scenarios_on(database_url: str, workdir: Path, args: argparse.Namespace) -> None:
    scenarios = set(args.scenarios.split(","))
    counts = [int(c) for c in args.counts.split(",")]
    tenant = await make_tenant(database_url)
    print(
        "| scenario | subscribers | sockets | interval s | deliveries | deliveries/s | p50 ms"
        " | p99 ms | max ms | server RSS KB/subscriber | server CPU µs/delivery"
        " | client CPU µs/delivery |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)

    def run(label: str, instances: list[ServeProcess], n: int, interval: float, **kw: Any) -> Any:
        return measure(
            label, database_url, tenant, instances, n, args.events, interval, args.per_socket,
            workdir, clients_per_instance=args.clients, deflate=args.deflate, **kw,
        )  # fmt: skip

    if scenarios & {"solo", "rate"}:
        solo = ServeProcess.on_database(database_url, workdir, "solo")
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
        group: list[ServeProcess] = []
        try:
            redis.start()
            size = 4 if "wide" in scenarios else 2
            group = [
                ServeProcess.on_database(database_url, workdir, f"r{n}", redis_url=redis.url)
                for n in range(size)
            ]
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
