"""Faults against real processes: PostgreSQL killed and restarted under concurrent writes, and
`memql serve` killed in the middle of large batches. What each asserts: every acknowledged write
is present afterwards; every batch is all there or not there at all; while the database is away
every request is answered promptly with HTTP 503 `SERVICE_UNAVAILABLE` (never a 500, never a
hang); the service recovers without being restarted (or, killed, a new process serves); and the
event stream, resumed from the last cursor a subscriber received, delivers exactly the events
the log holds, in order, none twice.

Redis killed and the relay leader killed under a live stream (nothing lost, nothing duplicated)
are proved by `test_realtime_cluster.py` across two instances."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import tempfile
import time
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from memql.db.migrate import migrate
from memql.db.pool import owner_connection
from memql.testing import PostgresProcess, ServeProcess, Tenant, make_tenant
from tests.operations import SAVE, SAVE_MANY
from tests.ws import EventSubscription

# `memql serve` loads the real model: the tests on the suite's database live in its world
pytestmark = pytest.mark.model

POOL_WAIT = 1.0
# the pool's wait plus room for a loaded machine: far below the 30 s of a pool's default
PROMPT = POOL_WAIT + 8


# --- writers ---------------------------------------------------------------------------------


@dataclass
class Write:
    """One request: the contents it carried and how it was answered."""

    user: str
    contents: list[str]
    status: int | None = None
    codes: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    error: str | None = None
    took: float = 0.0
    sent_at: float = 0.0

    @property
    def acknowledged(self) -> bool:
        return self.status == 200 and not self.codes and len(self.outcomes) == len(self.contents)


class Writers:
    """`clients` concurrent clients, each its own user (`<tag>-<n>`), sending `saveMemory` and
    `saveMemories` of `batch` memories by turns (only batches without `singles`) until stopped.
    Every text is distinct in its numbers, so no save is absorbed into another: the same turn
    and place under two labels reads a different count, since texts that differ only in a word
    and agree on every number are near-duplicates."""

    def __init__(
        self,
        url: str,
        tenant: Tenant,
        clients: int,
        batch: int,
        tag: str,
        *,
        label: str = "note",
        singles: bool = True,
    ) -> None:
        self.url = url
        self.label = label
        self.singles = singles
        self.tenant = tenant
        self.users = [f"{tag}-{c}" for c in range(clients)]
        self.batch = batch
        self.tag = tag
        self.writes: list[Write] = []
        self.in_flight: set[int] = set()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._client(u)) for u in self.users]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    def acknowledged_since(self, moment: float, user: str | None = None) -> int:
        return sum(
            w.acknowledged and w.sent_at >= moment and user in (None, w.user) for w in self.writes
        )

    async def _client(self, user: str) -> None:
        headers = {"Authorization": f"Bearer {self.tenant.key}", "X-User-Id": user}
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as http:
            for i in itertools.count():
                if self._stop.is_set():
                    return
                size = 1 if self.singles and i % 2 == 0 else self.batch
                texts = [
                    f"{user} {self.label} {i}.{j}: reading {self._count(i, j)} units."
                    for j in range(size)
                ]
                await self._send(http, headers, Write(user, texts))

    def _count(self, i: int, j: int) -> int:
        # one count per (i, j) within a label (j < 131 and 100003 prime), another under each label
        return ((i * 131 + j) * 7919 + zlib.crc32(self.label.encode())) % 100003

    async def _send(self, http: httpx.AsyncClient, headers: dict[str, str], write: Write) -> None:
        inputs = [{"content": t, "kind": "EPISODIC"} for t in write.contents]
        if len(inputs) == 1:
            body = {"query": SAVE, "variables": {"input": inputs[0]}}
        else:
            body = {"query": SAVE_MANY, "variables": {"inputs": inputs}}
        self.writes.append(write)
        self.in_flight.add(id(write))
        write.sent_at = time.monotonic()
        try:
            response = await http.post("/graphql", json=body, headers=headers)
        except httpx.HTTPError as exc:  # the server went away mid-request
            write.error = repr(exc)
            await asyncio.sleep(0.05)
            return
        finally:
            write.took = time.monotonic() - write.sent_at
            self.in_flight.discard(id(write))
        write.status = response.status_code
        try:
            answer: dict[str, Any] = response.json()
        except ValueError:
            write.error = response.text[:300]
            return
        write.codes = [e.get("extensions", {}).get("code") for e in answer.get("errors") or []]
        data = answer.get("data") or {}
        if data.get("saveMemory"):
            write.outcomes = [data["saveMemory"]["outcome"]]
        elif data.get("saveMemories"):
            write.outcomes = [r["outcome"] for r in data["saveMemories"]]
        if write.codes:
            await asyncio.sleep(0.05)  # a client backs off a little when refused


# --- a subscriber that resumes ----------------------------------------------------------------


class Follower:
    """A `memoryEvents` subscriber that, whenever its stream ends or cannot start, subscribes
    again with `since` = the last cursor it received, as a client resuming a stream does."""

    def __init__(self, url: Callable[[], str], tenant: Tenant, user: str, since: str) -> None:
        self.url = url
        self.tenant = tenant
        self.user = user
        self.since = since
        self.cursors: list[str] = []
        self.interruptions: list[str] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _follow(self) -> None:
        while True:
            since = self.cursors[-1] if self.cursors else self.since
            try:
                async with EventSubscription(
                    self.url(), self.tenant.key, self.user, since=since
                ) as s:
                    while True:
                        with contextlib.suppress(TimeoutError):
                            self.cursors.append((await s.next(1.0))["cursor"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the stream ended or could not start: resume
                self.interruptions.append(repr(exc)[:200])
                await asyncio.sleep(0.2)

    async def until(self, expected: list[str], within: float) -> None:
        """Wait until as many events as `expected` came (or `within` passed), and a little
        more: anything beyond the log would show up then."""
        with contextlib.suppress(AssertionError):
            await until(lambda: len(self.cursors) >= len(expected), within, "")
        await asyncio.sleep(0.5)


# --- checks on what the database holds ---------------------------------------------------------


async def present(database_url: str, tenant: Tenant) -> dict[str, int]:
    """Each live content of the project -> how many memories hold it."""
    async with await owner_connection(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "select content, count(*) from memories where project_id = %s and invalidated_at"
            " is null group by content",
            (tenant.project_id,),
        )
        return {content: int(n) for content, n in await cur.fetchall()}


async def event_log(database_url: str, tenant: Tenant) -> list[tuple[str, str, str, str]]:
    """(cursor, type, owner, memory id) of the project's events, in cursor order."""
    async with await owner_connection(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "select cursor, type, owner_id, memory_id::text from memory_events"
            " where project_id = %s order by cursor",
            (tenant.project_id,),
        )
        return [(str(c), kind, owner, m) for c, kind, owner, m in await cur.fetchall()]


async def memory_ids(database_url: str, tenant: Tenant) -> set[str]:
    async with await owner_connection(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "select id::text from memories where project_id = %s", (tenant.project_id,)
        )
        return {i for (i,) in await cur.fetchall()}


async def assert_writes_whole(database_url: str, tenant: Tenant, writes: list[Write]) -> None:
    """Every acknowledged write present once; every other write all there or not at all; every
    memory with exactly one `memory.created` event."""
    held = await present(database_url, tenant)
    for w in writes:
        counts = [held.get(c, 0) for c in w.contents]
        if w.acknowledged:
            assert w.outcomes == ["CREATED"] * len(w.contents), w
            assert counts == [1] * len(w.contents), f"an acknowledged write is missing: {w}"
        else:
            assert counts in ([0] * len(counts), [1] * len(counts)), f"half a batch: {w}, {counts}"
    sent = {c for w in writes for c in w.contents}
    assert set(held) <= sent
    assert all(n == 1 for n in held.values())
    log = await event_log(database_url, tenant)
    created = [memory for _, kind, _, memory in log if kind == "memory.created"]
    assert sorted(created) == sorted(await memory_ids(database_url, tenant))
    assert len(created) == len(set(created)) == len(log)


async def until(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"not within {within} s: {what}"
        await asyncio.sleep(0.1)


# --- PostgreSQL killed -------------------------------------------------------------------------


@dataclass
class Crashable:
    postgres: PostgresProcess
    server: ServeProcess
    tenant: Tenant


@pytest.fixture(scope="module")
async def crashable() -> AsyncIterator[Crashable]:
    """A `memql serve` on a PostgreSQL of this module's own, which the tests kill."""
    workdir = Path(tempfile.mkdtemp(prefix="memql-faults-"))
    postgres = await asyncio.to_thread(PostgresProcess, workdir)
    server: ServeProcess | None = None
    try:
        await migrate(postgres.url)
        server = ServeProcess.on_database(
            postgres.url,
            workdir,
            "pg-killed",
            env={"MEMQL_POOL_TIMEOUT_SECONDS": str(POOL_WAIT), "MEMQL_POOL_MAX_SIZE": "8"},
        )
        await server.ready()
        yield Crashable(postgres, server, await make_tenant(postgres.url))
    finally:
        if server is not None:
            server.stop()
        await asyncio.to_thread(postgres.stop)


async def test_postgresql_killed_under_concurrent_writes_loses_no_acknowledged_write(crashable):
    """Four clients write (single saves and batches of five) while every PostgreSQL process is
    killed, and for 2 s nothing listens; then PostgreSQL starts again on the same data."""
    pg, server, tenant = crashable.postgres, crashable.server, crashable.tenant
    writers = Writers(server.url, tenant, clients=4, batch=5, tag="pg")
    follower = Follower(lambda: server.url, tenant, writers.users[0], since="0")
    follower.start()
    writers.start()
    try:
        await until(
            lambda: all(writers.acknowledged_since(0, u) >= 2 for u in writers.users),
            30,
            "every client has written before the crash",
        )
        killed = time.monotonic()
        await asyncio.to_thread(pg.kill)
        # the outage: every request is refused promptly while PostgreSQL is gone
        await asyncio.sleep(2.0)
        await asyncio.to_thread(pg.start)
        back = time.monotonic()
        await until(
            lambda: all(writers.acknowledged_since(back, u) >= 2 for u in writers.users),
            30,
            "every client writes again after PostgreSQL is back, the server not restarted",
        )
    finally:
        await writers.stop()
    assert server.proc.poll() is None, "the server process died"

    during = [w for w in writers.writes if killed < w.sent_at and w.sent_at + w.took < back]
    refused = [w for w in writers.writes if not w.acknowledged]
    assert during and all(not w.acknowledged for w in during), "the outage was not seen"
    for w in refused:
        assert w.error is None, f"no answer: {w}"
        assert w.status == 503 and set(w.codes) == {"SERVICE_UNAVAILABLE"}, w
        assert w.took < PROMPT, w
    await assert_writes_whole(pg.url, tenant, writers.writes)

    log = await event_log(pg.url, tenant)
    expected = [cursor for cursor, _, owner, _ in log if owner == writers.users[0]]
    await follower.until(expected, within=30)
    await follower.stop()
    assert follower.cursors == expected, follower.interruptions
    # refused while PostgreSQL was away: told to try again, never that its key is forbidden
    assert not [i for i in follower.interruptions if "4403" in i], follower.interruptions


# --- memql serve killed ------------------------------------------------------------------------


async def batch_being_written(database_url: str) -> tuple[int, Any] | None:
    """A save being written at this moment, waiting for its server's next statement (it has
    written rows, its last statement was on memories, and it has not committed), if there is
    one: its transaction id and when its backend last changed state."""
    async with await owner_connection(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "select backend_xid::text::bigint, state_change from pg_stat_activity"
            " where backend_xid is not null and pid <> pg_backend_pid()"
            " and state = 'idle in transaction' and query ~ 'memor(y|ies)'"
            " order by xact_start limit 1"
        )
        row = await cur.fetchone()
        return (int(row[0]), row[1]) if row else None


async def kill_mid_batch(database_url: str, instance: ServeProcess) -> int:
    """SIGKILL `instance` while one of its batches has written rows and not committed; that
    transaction's id. The server is frozen (SIGSTOP) once such a transaction waits for it, and
    killed only if the transaction still waits untouched: a COMMIT sent just before the kill
    would otherwise still commit it."""
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline, "no batch was caught being written"
        caught = await batch_being_written(database_url)
        if caught is None:
            continue
        instance.proc.send_signal(signal.SIGSTOP)
        await asyncio.sleep(0.05)
        if await batch_being_written(database_url) == caught:
            instance.kill()
            return caught[0]
        instance.proc.send_signal(signal.SIGCONT)


async def transaction_status(database_url: str, xid: int) -> str:
    async with await owner_connection(database_url, autocommit=True) as conn:
        cur = await conn.execute("select pg_xact_status(%s::text::xid8)", (xid,))
        row = await cur.fetchone()
        assert row is not None
        return str(row[0])


async def test_memql_killed_mid_batch_leaves_each_batch_whole_and_a_new_process_resumes(
    database_url,
):
    """SIGKILL while batches of 100 are being written: the transaction caught writing is rolled
    back, each batch is all there or not at all, every acknowledged write is there, and a new
    process on the same database serves, and streams on from where the subscriber was."""
    workdir = Path(tempfile.mkdtemp(prefix="memql-killed-"))
    tenant = await make_tenant(database_url)
    instances = [ServeProcess.on_database(database_url, workdir, "killed")]
    try:
        await instances[0].ready()
        before = Writers(instances[0].url, tenant, 3, batch=100, tag="mid-batch", singles=False)
        user = before.users[0]
        follower = Follower(lambda: instances[-1].url, tenant, user, since="0")
        follower.start()
        before.start()
        try:
            await until(
                lambda: all(before.acknowledged_since(0, u) >= 1 for u in before.users),
                60,
                "every client has written before the kill",
            )
            xid = await kill_mid_batch(database_url, instances[0])
            cut = [w for w in before.writes if id(w) in before.in_flight]
        finally:
            await before.stop()
        assert any(len(w.contents) == 100 for w in cut), cut

        # the transaction caught mid-batch is rolled back, not left half-written
        async def settled() -> str:
            return await transaction_status(database_url, xid)

        deadline = time.monotonic() + 30
        while (status := await settled()) == "in progress":
            assert time.monotonic() < deadline, "the killed server's transaction lingers"
            await asyncio.sleep(0.1)
        assert status == "aborted"
        await assert_writes_whole(database_url, tenant, before.writes)

        instances.append(ServeProcess.on_database(database_url, workdir, "restarted"))
        await instances[1].ready()
        after = Writers(instances[1].url, tenant, 3, batch=5, tag="mid-batch", label="later")
        after.start()
        try:
            await until(
                lambda: all(after.acknowledged_since(0, u) >= 2 for u in after.users),
                30,
                "the new process serves every client",
            )
        finally:
            await after.stop()
        assert all(w.acknowledged for w in after.writes), after.writes
        await assert_writes_whole(database_url, tenant, before.writes + after.writes)

        log = await event_log(database_url, tenant)
        expected = [cursor for cursor, _, owner, _ in log if owner == user]
        await follower.until(expected, within=30)
        await follower.stop()
        assert follower.cursors == expected, follower.interruptions
    finally:
        for instance in instances:
            instance.stop()
