"""Prometheus metrics, served at /metrics."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar, Protocol

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


# a family of one sample: its kind, name and help, and the keys of the stats it is the sum of
_Family = tuple[type[GaugeMetricFamily] | type[CounterMetricFamily], str, str, tuple[str, ...]]


def _gauge(name: str, documentation: str, *keys: str) -> _Family:
    return (GaugeMetricFamily, name, documentation, keys)


def _counter(name: str, documentation: str, *keys: str) -> _Family:
    return (CounterMetricFamily, name, documentation, keys)


class _StatsCollector(Collector):
    """The `FAMILIES`, read from `stats()` at every scrape; none while it returns None (a key it
    lacks reads as 0)."""

    FAMILIES: ClassVar[tuple[_Family, ...]]

    def stats(self) -> Mapping[str, int] | None:
        raise NotImplementedError

    def collect(self) -> Iterable[Metric]:
        stats = self.stats()
        if stats is None:
            return []
        return [
            kind(name, documentation, value=sum(stats.get(key, 0) for key in keys))
            for kind, name, documentation, keys in self.FAMILIES
        ]


class _PoolCollector(_StatsCollector):
    FAMILIES = (
        _gauge("memql_db_pool_size", "Connections open in the pool", "pool_size"),
        _gauge("memql_db_pool_available", "Idle connections in the pool", "pool_available"),
        _gauge("memql_db_pool_waiting", "Requests waiting for a connection", "requests_waiting"),
        _gauge(
            "memql_db_pool_project_waiting",
            "Requests waiting for their project's share of the pool (MEMQL_POOL_PROJECT_SHARE)",
            "share_waiting",
        ),
        _gauge(
            "memql_db_pool_projects_at_share",
            "Projects holding their whole share of the pool",
            "share_projects_full",
        ),
        _counter(
            "memql_db_pool_timeouts",
            "Requests that got no connection within the pool's wait",
            "requests_errors",
        ),
        _counter(
            "memql_db_pool_connections_discarded",
            "Connections found broken on their return and replaced",
            "returns_bad",
            "connections_lost",
        ),
    )
    pool: AsyncConnectionPool | None = None
    shares: Shares | None = None

    def stats(self) -> Mapping[str, int] | None:
        if self.pool is None:
            return None
        # the shares' keys prefixed, apart from the pool's own
        shared = self.shares.stats() if self.shares is not None else {}
        return {**self.pool.get_stats(), **{f"share_{key}": n for key, n in shared.items()}}


class _CostCollector(_StatsCollector):
    """What MEMQL_PROJECT_COST_AT_ONCE holds back: requests waiting for their project's turn."""

    FAMILIES = (
        _gauge(
            "memql_cost_share_waiting",
            "Requests waiting for their project's share of the server (MEMQL_PROJECT_COST_AT_ONCE)",
            "waiting",
        ),
        _gauge(
            "memql_cost_share_points_running",
            "Cost points of the requests running now",
            "points_running",
        ),
        _gauge(
            "memql_cost_share_projects_running",
            "Projects with a request running now",
            "projects_running",
        ),
        _counter(
            "memql_cost_share_refused",
            "Requests refused with TOO_MANY_REQUESTS because their turn did not come in time",
            "refused",
        ),
    )
    shares: Shares | None = None

    def stats(self) -> Mapping[str, int] | None:
        return self.shares.stats() if self.shares is not None else None


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
