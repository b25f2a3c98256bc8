"""Prometheus metrics, served at /metrics."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from psycopg_pool import AsyncConnectionPool

REGISTRY = CollectorRegistry(auto_describe=True)

OPERATIONS = Counter(
    "memql_graphql_operations",
    "GraphQL operations by type and result",
    ["operation", "result"],
    registry=REGISTRY,
)
OPERATION_SECONDS = Histogram(
    "memql_graphql_operation_seconds",
    "GraphQL operation duration",
    ["operation"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
SAVES = Counter("memql_saves", "Saved memories by outcome", ["outcome"], registry=REGISTRY)
STANDBY_READS = Counter(
    "memql_standby_reads",
    "Reads with a read URL set, by where they ran: standby, standby_waited (for the caller's"
    " last write), or primary_behind / primary_away / primary_refused / primary_unknown",
    ["outcome"],
    registry=REGISTRY,
)
MCP_TOOL_CALLS = Counter(
    "memql_mcp_tool_calls",
    "MCP tool calls by tool and result",
    ["tool", "result"],
    registry=REGISTRY,
)


class Shares(Protocol):
    def stats(self) -> Mapping[str, int]: ...


class _PoolCollector(Collector):
    pool: AsyncConnectionPool | None = None
    shares: Shares | None = None

    def collect(self) -> Iterable[Metric]:
        if self.pool is None:
            return []
        stats = self.pool.get_stats()
        shared = self.shares.stats() if self.shares is not None else {}
        size = GaugeMetricFamily("memql_db_pool_size", "Connections open in the pool")
        size.add_metric([], stats.get("pool_size", 0))
        idle = GaugeMetricFamily("memql_db_pool_available", "Idle connections in the pool")
        idle.add_metric([], stats.get("pool_available", 0))
        waiting = GaugeMetricFamily("memql_db_pool_waiting", "Requests waiting for a connection")
        waiting.add_metric([], stats.get("requests_waiting", 0))
        project_waiting = GaugeMetricFamily(
            "memql_db_pool_project_waiting",
            "Requests waiting for their project's share of the pool (MEMQL_POOL_PROJECT_SHARE)",
        )
        project_waiting.add_metric([], shared.get("waiting", 0))
        full = GaugeMetricFamily(
            "memql_db_pool_projects_at_share", "Projects holding their whole share of the pool"
        )
        full.add_metric([], shared.get("projects_full", 0))
        timeouts = CounterMetricFamily(
            "memql_db_pool_timeouts", "Requests that got no connection within the pool's wait"
        )
        timeouts.add_metric([], stats.get("requests_errors", 0))
        lost = CounterMetricFamily(
            "memql_db_pool_connections_discarded",
            "Connections found broken on their return and replaced",
        )
        lost.add_metric([], stats.get("returns_bad", 0) + stats.get("connections_lost", 0))
        return [size, idle, waiting, project_waiting, full, timeouts, lost]


class _CostCollector(Collector):
    """What MEMQL_PROJECT_COST_AT_ONCE holds back: requests waiting for their project's turn."""

    shares: Shares | None = None

    def collect(self) -> Iterable[Metric]:
        if self.shares is None:
            return []
        stats = self.shares.stats()
        waiting = GaugeMetricFamily(
            "memql_cost_share_waiting",
            "Requests waiting for their project's share of the server (MEMQL_PROJECT_COST_AT_ONCE)",
        )
        waiting.add_metric([], stats.get("waiting", 0))
        points = GaugeMetricFamily(
            "memql_cost_share_points_running", "Cost points of the requests running now"
        )
        points.add_metric([], stats.get("points_running", 0))
        projects = GaugeMetricFamily(
            "memql_cost_share_projects_running", "Projects with a request running now"
        )
        projects.add_metric([], stats.get("projects_running", 0))
        refused = CounterMetricFamily(
            "memql_cost_share_refused",
            "Requests refused with TOO_MANY_REQUESTS because their turn did not come in time",
        )
        refused.add_metric([], stats.get("refused", 0))
        return [waiting, points, projects, refused]


_pool_collector = _PoolCollector()
REGISTRY.register(_pool_collector)
_cost_collector = _CostCollector()
REGISTRY.register(_cost_collector)


def watch_pool(
    pool: AsyncConnectionPool | None,
    shares: Shares | None = None,
    cost_shares: Shares | None = None,
) -> None:
    _pool_collector.pool = pool
    _pool_collector.shares = shares
    _cost_collector.shares = cost_shares


# realtime
SUBSCRIPTIONS = Gauge(
    "memql_realtime_subscriptions",
    "memoryEvents streams set up on this instance (each receives every later event)",
    registry=REGISTRY,
)
EVENTS_PUBLISHED = Counter(
    "memql_realtime_events_published",
    "Events this instance's relay published to the broadcast",
    registry=REGISTRY,
)
STREAMS_CLOSED = Counter(
    "memql_realtime_streams_closed",
    "memoryEvents streams the server ended, by error code",
    ["code"],
    registry=REGISTRY,
)
EVENT_RENDERS = Counter(
    "memql_realtime_event_renders",
    "Subscription selections executed on an event (once per distinct selection, not per socket)",
    registry=REGISTRY,
)
LIVE_WRITES = Counter(
    "memql_realtime_live_writes",
    "Live events written to a socket with a selection already executed for another subscriber",
    registry=REGISTRY,
)
CREDENTIAL_RECHECKS = Counter(
    "memql_realtime_credential_rechecks",
    "Distinct credentials of live streams resolved again (one per API key or token per pass)",
    registry=REGISTRY,
)
QUERY_VECTORS = Counter(
    "memql_query_vectors",
    "Query embeddings asked of the query-vector cache, by result (hit: kept or being computed"
    " for another request; miss: embedded for this one). Hit rate: hit / (hit + miss)",
    ["result"],
    registry=REGISTRY,
)
QUERY_VECTORS_KEPT = Gauge(
    "memql_query_vectors_kept", "Query vectors kept by this instance", registry=REGISTRY
)
