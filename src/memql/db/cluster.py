"""SQL of a Citus cluster's layout, for the work that follows where the shards live: the worker
groups and the hash ranges of the shards each holds (the relay leads per group, listening on
its worker, where the shards' triggers notify)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memql.db.pool import Conn


@dataclass(frozen=True)
class WorkerGroup:
    """A worker group (a worker's primary and its standbys) by its primary's address."""

    id: int
    host: str
    port: int

    def url(self, coordinator_url: str) -> str:
        """`coordinator_url` pointing at this worker's primary (same database, user and
        options: memql connects to a worker as it does to the coordinator)."""
        params = conninfo_to_dict(coordinator_url)
        params.update(host=self.host, port=str(self.port))
        return make_conninfo("", **params)


async def worker_groups(conn: Conn) -> list[WorkerGroup]:
    """The groups that hold shards of memql's tables, by id."""
    cur = await conn.execute(
        """
        select n.groupid, n.nodename, n.nodeport from pg_dist_node n
        where n.noderole = 'primary' and n.isactive and n.groupid in (
            select p.groupid from pg_dist_placement p join pg_dist_shard s using (shardid)
            where s.logicalrelid = 'project_cursors'::regclass)
        order by n.groupid
        """
    )
    return [WorkerGroup(int(g), str(h), int(p)) for g, h, p in await cur.fetchall()]


async def group_ranges(conn: Conn, group: int) -> list[tuple[int, int]]:
    """The hash ranges of the shards `group` holds now (shards move in a rebalance)."""
    cur = await conn.execute(
        """
        select s.shardminvalue::int, s.shardmaxvalue::int
        from pg_dist_shard s join pg_dist_placement p using (shardid)
        where s.logicalrelid = 'project_cursors'::regclass and p.groupid = %s
        order by 1
        """,
        (group,),
    )
    return [(int(low), int(high)) for low, high in await cur.fetchall()]


async def group_of(conn: Conn, project_id: uuid.UUID) -> WorkerGroup:
    """The worker group that holds the project's shard now (where its writes notify)."""
    cur = await conn.execute(
        """
        select n.groupid, n.nodename, n.nodeport
        from pg_dist_placement p join pg_dist_node n using (groupid)
        where p.shardid = get_shard_id_for_distribution_column('project_cursors', %s)
          and n.noderole = 'primary'
        """,
        (project_id,),
    )
    row = await cur.fetchone()
    assert row is not None
    return WorkerGroup(int(row[0]), str(row[1]), int(row[2]))
