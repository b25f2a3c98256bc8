"""Testing helpers, shipped with memql for its own tests and benchmarks and for apps built on it.

- `HashEmbedder`: deterministic vectors without a model (for tests whose point is not meaning)
- `serving(settings, embedder)`: a server in this process on a free port; `ServeProcess`: a
  `memql serve` process; `RedisProcess`: a private redis-server; `PostgresProcess`: a private
  embedded PostgreSQL to kill and start again (fault tests); `free_port()`
- `StandbyPair()`: a PostgreSQL primary and a hot standby streaming from it, on loopback
  ports, the standby's replay paused, resumed or the standby killed at will (reads on replicas)
- `CitusCluster()`: a Citus coordinator and two workers on loopback ports (Citus built by
  scripts/build-citus.sh, cached outside the checkout)
- `SentinelGroup(workdir)`: a Redis master, its replica and a Sentinel, `failover()` at will
- `RedisClusterGroup(workdir, masters, replicas)`: a Redis Cluster on loopback ports, a slot
  moved (`move_slot`) or a master killed (`kill`) at will
- `make_tenant(database_url)`: a fresh project and an API key (`Tenant`); `fresh_database(url)`:
  a new database on the same server, dropped at the end; `log_event(url, project_id)`: an event
  straight into the log; `draw_event(conn, project_id)`: one drawn in an open transaction
- `GraphQLClient`: one user of one project over HTTP, answers checked
- `webhook_receiver()`: a real HTTP endpoint that records the webhooks it receives
- `dribbling_receiver()`: a hostile one that answers a byte at a time and never finishes

Databases and services come from `memql.runtime` (`open_database`, `open_memql`), as in the app.
"""

from memql.testing.citus import CitusCluster
from memql.testing.client import GraphQLClient
from memql.testing.database import (
    Tenant,
    draw_event,
    fresh_database,
    log_event,
    make_tenant,
    newest_cursor,
)
from memql.testing.embedder import HashEmbedder
from memql.testing.redis_cluster import RedisClusterGroup
from memql.testing.sentinel import SentinelGroup
from memql.testing.server import (
    PostgresProcess,
    RedisProcess,
    ServeProcess,
    free_port,
    serving,
)
from memql.testing.standby import StandbyPair
from memql.testing.webhooks import (
    Dribbler,
    Received,
    Receiver,
    dribbling_receiver,
    webhook_receiver,
)

__all__ = [
    "CitusCluster",
    "Dribbler",
    "GraphQLClient",
    "HashEmbedder",
    "PostgresProcess",
    "Received",
    "Receiver",
    "RedisClusterGroup",
    "RedisProcess",
    "SentinelGroup",
    "ServeProcess",
    "StandbyPair",
    "Tenant",
    "draw_event",
    "dribbling_receiver",
    "free_port",
    "fresh_database",
    "log_event",
    "make_tenant",
    "newest_cursor",
    "serving",
    "webhook_receiver",
]
