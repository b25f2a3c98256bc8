"""A mixed soak of one `memql serve` from several client processes.

    .venv/bin/python bench/soak.py [--minutes 10] [--clients 4]

Starts `memql serve` (embedded PostgreSQL in a temporary directory, the real model), creates an
API key with the CLI, then runs `--clients` processes for `--minutes`: each saves, recalls,
lists, supersedes, retires and reads the context block as its own user (and on the shared
project scope), and keeps a `memoryEvents` stream open over a websocket. It prints the total of
requests, every HTTP status and error code seen (0 answers of 5xx expected), the events the
streams received, and the server's resident memory over time (it should stay flat).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import websockets

from memql.testing import ServeProcess

SAVE = """mutation($i: SaveMemoryInput!) { saveMemory(input: $i) { outcome memory { id } } }"""
RECALL = "query($q: String!) { recall(query: $q, limit: 5) { score memory { id } } }"
LIST = """query($a: String) {
  memories(first: 20, after: $a) { edges { node { id } } pageInfo { endCursor hasNextPage } } }"""
SUPERSEDE = """mutation($id: ID, $i: SaveMemoryInput!) {
  supersedeMemory(id: $id, input: $i) { memory { id } } }"""
RETIRE = "mutation($id: ID) { retireMemory(id: $id) { id } }"
CONTEXT = "query($q: String) { memoryContext(query: $q, budget: 2000) { count omitted } }"
EVENTS = "subscription { memoryEvents { cursor type } }"

TOPICS = ["tea", "deploys", "billing", "travel", "code review", "on-call", "hiring", "testing"]
VERBS = ["prefers", "asked about", "owns", "worries about", "wrote about", "dislikes"]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def stream(url: str, headers: dict[str, str], stop: float, tally: Counter[str]) -> None:
    """One memoryEvents subscription, held open until `stop` (reopened if it ends)."""
    ws_url = url.replace("http://", "ws://") + "/graphql"
    while time.monotonic() < stop:
        try:
            async with websockets.connect(
                ws_url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")]
            ) as ws:
                await ws.send(json.dumps({"type": "connection_init", "payload": headers}))
                await ws.recv()
                sub = {"id": "1", "type": "subscribe", "payload": {"query": EVENTS}}
                await ws.send(json.dumps(sub))
                tally["ws subscribe"] += 1
                while time.monotonic() < stop:
                    try:
                        raw = await asyncio.wait_for(ws.recv(), 1.0)
                    except TimeoutError:
                        continue
                    message = json.loads(raw)
                    if message["type"] == "next" and not message["payload"].get("errors"):
                        tally["ws events"] += 1
                    elif message["type"] == "ping":
                        await ws.send(json.dumps({"type": "pong"}))
                    else:
                        tally[f"ws {message['type']}"] += 1
                        break
        except (OSError, websockets.WebSocketException) as exc:
            tally[f"ws failure {type(exc).__name__}"] += 1
            await asyncio.sleep(0.5)


async def client(url: str, key: str, index: int, seconds: float) -> dict[str, Any]:
    rng = random.Random(index)
    user = f"soak-{index}"
    headers = {"Authorization": f"Bearer {key}", "X-User-Id": user}
    tally: Counter[str] = Counter()
    live: list[str] = []
    stop = time.monotonic() + seconds
    streamer = asyncio.create_task(stream(url, headers, stop, tally))

    async def call(http: httpx.AsyncClient, name: str, query: str, variables: dict[str, Any]):
        tally["requests"] += 1
        tally[f"op {name}"] += 1
        try:
            response = await http.post("/graphql", json={"query": query, "variables": variables})
        except httpx.HTTPError as exc:
            tally[f"transport {type(exc).__name__}"] += 1
            return None
        tally[f"http {response.status_code}"] += 1
        body = response.json()
        for error in body.get("errors") or []:
            tally[f"code {error.get('extensions', {}).get('code')}"] += 1
        return body.get("data")

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        n = 0
        while time.monotonic() < stop:
            n += 1
            topic, verb = rng.choice(TOPICS), rng.choice(VERBS)
            roll = rng.random()
            if roll < 0.30 or not live:
                scope = "PROJECT" if rng.random() < 0.2 else "USER"
                text = f"{user} {verb} {topic} (note {n}, {rng.randrange(10**6)})."
                data = await call(
                    http, "save", SAVE, {"i": {"content": text, "kind": "TOPICAL", "scope": scope}}
                )
                if data:
                    live.append(data["saveMemory"]["memory"]["id"])
            elif roll < 0.55:
                await call(http, "recall", RECALL, {"q": f"what about {topic}"})
            elif roll < 0.70:
                await call(http, "list", LIST, {"a": None})
            elif roll < 0.80:
                old = live.pop(rng.randrange(len(live)))
                text = f"{user} now {verb} {topic} (revised {n}, {rng.randrange(10**6)})."
                data = await call(
                    http,
                    "supersede",
                    SUPERSEDE,
                    {"id": old, "i": {"content": text, "kind": "TOPICAL"}},
                )
                if data:
                    live.append(data["supersedeMemory"]["memory"]["id"])
            elif roll < 0.90:
                await call(http, "retire", RETIRE, {"id": live.pop(rng.randrange(len(live)))})
            else:
                await call(http, "context", CONTEXT, {"q": f"{topic}?"})
            if len(live) > 200:
                del live[:100]
    await streamer
    return dict(tally)


def run_client(url: str, key: str, index: int, seconds: float, results: Any) -> None:
    results.put(asyncio.run(client(url, key, index, seconds)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--sample-seconds", type=float, default=30.0)
    args = parser.parse_args()
    memql = str(Path(sys.executable).with_name("memql"))
    data_dir = tempfile.mkdtemp(prefix="memql-soak-")
    env = {**os.environ, "MEMQL_DATA_DIR": data_dir}
    # its output goes to a file, not a pipe: access logs would fill a pipe and block
    server = ServeProcess({"MEMQL_DATA_DIR": data_dir}, Path(data_dir), "serve")
    url = server.url
    try:
        try:
            asyncio.run(server.ready(within=180))
        except RuntimeError as exc:
            raise SystemExit(f"memql serve did not become ready: {exc}") from None
        created = subprocess.run(
            [memql, "keys", "create", "--project", "dev"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        key = created.stdout.strip().splitlines()[-1]
        seconds = args.minutes * 60
        results: Any = multiprocessing.Queue()
        workers = [
            multiprocessing.Process(target=run_client, args=(url, key, i, seconds, results))
            for i in range(args.clients)
        ]
        start = time.monotonic()
        rss = [(0.0, rss_kib(server.proc.pid))]
        for w in workers:
            w.start()
        while any(w.is_alive() for w in workers) and results.qsize() < len(workers):
            time.sleep(min(args.sample_seconds, 5.0))
            elapsed = time.monotonic() - start
            if elapsed - rss[-1][0] >= args.sample_seconds:
                rss.append((elapsed, rss_kib(server.proc.pid)))
        tallies = [results.get(timeout=120) for _ in workers]
        for w in workers:
            w.join()
        rss.append((time.monotonic() - start, rss_kib(server.proc.pid)))
    finally:
        server.stop()
    stderr = server.log.read_text()
    total: Counter[str] = Counter()
    for tally in tallies:
        total.update(tally)
    server_errors = sum(v for k, v in total.items() if k.startswith("http 5"))
    print(f"## soak: {args.clients} client processes, {args.minutes:g} minutes, one memql serve\n")
    print(f"- requests: {total['requests']} ({total['requests'] / (rss[-1][0] or 1):.1f}/s)")
    print(f"- answers of 5xx: {server_errors}")
    for prefix in ("op ", "http ", "code ", "ws ", "transport "):
        seen = {k[len(prefix) :]: v for k, v in sorted(total.items()) if k.startswith(prefix)}
        if seen:
            print(f"- {prefix.strip()}: " + ", ".join(f"{k} {v}" for k, v in seen.items()))
    print(
        "- server RSS (MiB) by minute: "
        + ", ".join(f"{t / 60:.1f}: {kib / 1024:.0f}" for t, kib in rss)
    )
    unexpected = [line for line in stderr.splitlines() if "Traceback" in line or "ERROR" in line]
    print(f"- server log: {server.log}")
    print(f"- server log lines with ERROR or Traceback: {len(unexpected)}")
    for line in unexpected[:10]:
        print(f"    {line}")
    return 1 if server_errors or unexpected else 0


if __name__ == "__main__":
    raise SystemExit(main())
