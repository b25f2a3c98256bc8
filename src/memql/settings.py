"""One validated settings object, read from the environment when asked, never at import time."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import platformdirs

from memql.errors import ConfigurationError
from memql.model import Access, EmbedderConfig, Grant, Weights, parse_grant

DEFAULT_CLIENT_GRANT = Grant(user=Access.READ_WRITE, project=Access.READ)
DEFAULT_AGENT_GRANT = Grant(user=Access.READ_WRITE, project=Access.READ_WRITE)


# a batch runs its operations concurrently on one request's credentials; beyond this it is
# a denial of service, not a convenience
BATCH_MAX_LIMIT = 100


@dataclass(frozen=True)
class Limits:
    """Every bound a caller meets, and the defaults within them, in one place: the service and
    validation enforce them; GraphQL argument defaults and MCP tool schemas read `LIMITS`."""

    # a memory
    content_chars: int = 8192
    key_chars: int = 128
    category_chars: int = 64
    source_thread_ids: int = 100
    thread_id_chars: int = 256
    source_bytes: int = 16 * 1024
    # JSON values (`source`) deeper than this are refused before anything serialises them
    json_depth: int = 32
    # one save of several memories
    batch_save: int = 100
    # pages of a list
    list_default: int = 50
    list_max: int = 200
    # recall hits
    recall_default: int = 5
    recall_max: int = 20
    # the context block, in characters; the most memories it considers (a budget of 8000
    # characters holds ~100)
    context_budget: int = 8000
    context_budget_max: int = 100_000
    context_candidates: int = 500
    # near-duplicates a save reports
    near_duplicates_reported: int = 5


LIMITS = Limits()


@dataclass(frozen=True)
class Settings:
    database_url: str | None = None
    # where recall, lists, context blocks and counts may read: hot standbys of the primary
    # (libpq multi-host allowed); its parameters override the primary's (docs/scale.md)
    read_database_url: str | None = None
    # seconds a read on the standby waits for it to replay the caller's last write, before it
    # reads the primary instead
    read_wait_seconds: float = 0.05
    data_dir: Path = field(default_factory=lambda: Path(platformdirs.user_data_dir("memql")))
    redis_url: str | None = None
    embedder: str = "local"
    embeddings_url: str | None = None
    embeddings_model: str | None = None
    embeddings_dimensions: int | None = None
    embeddings_api_key: str | None = None
    # seconds before one request to a remote embedder is abandoned (and retried)
    embeddings_timeout: float = 10.0
    # what runs the local model (embeddings/local.py): auto, openvino or onnxruntime
    embeddings_runtime: str = "auto"
    host: str = "127.0.0.1"
    port: int = 8000
    # Cosine similarity at or above which a same-kind live memory absorbs a new save.
    absorb_threshold: float = 0.95
    # Cosine similarity at or above which other memories are reported as near-duplicates.
    near_duplicate_threshold: float = 0.80
    # How recall fuses its signals; None means the service's calibrated default.
    recall_weights: Weights | None = None
    graphiql: bool = True
    introspection: bool = True
    # origins (scheme://host[:port]) whose pages may call /graphql and /mcp and open websockets
    cors_origins: tuple[str, ...] = ()
    # operations one POST may batch (a JSON array); 0: batching is off
    batch_max: int = 0
    # automatic persisted queries each instance remembers; 0: APQ is off
    persisted_queries: int = 1000
    # the longest GraphQL document text (comments included), refused before it is parsed
    max_document_bytes: int = 64 * 1024
    # /metrics on its own port instead of the API's (same host); None: on the API port
    metrics_port: int | None = None
    # a bearer token /metrics requires; None: no token
    metrics_token: str | None = None
    # the built-in access policy: a grant per consumer; MEMQL_ACCESS_POLICY replaces it
    client_grant: Grant = DEFAULT_CLIENT_GRANT
    agent_grant: Grant = DEFAULT_AGENT_GRANT
    access_policy: str | None = None
    pool_min_size: int = 2
    pool_max_size: int = 10
    # query vectors kept per instance (service/query_vectors.py); 0 embeds every query anew
    query_vectors: int = 4096
    # seconds a request waits for a database connection before it is answered with 503
    pool_timeout_seconds: float = 5.0
    # the fraction of the pool one project's requests may hold or wait for at once (1: all)
    pool_project_share: float = 0.5
    # seconds one GraphQL operation (or MCP call) may spend with the database in all; each of
    # its statements is cancelled by PostgreSQL at that deadline (statement_timeout)
    request_timeout_seconds: float = 30.0
    # requests a second one credential (API key; browser token's user) or one project may
    # make, each with bursts of `rate_burst_seconds` worth; 0: not limited
    rate_per_key: float = 0.0
    rate_per_project: float = 0.0
    rate_burst_seconds: float = 2.0
    # realtime: live messages a subscriber may have waiting before it is closed as too slow
    subscriber_queue: int = 1000
    # realtime: seconds between credential checks of a live subscription
    auth_recheck_seconds: float = 3.0
    # the largest HTTP request body or websocket message; 4 MiB holds a full batch of the
    # longest memories (100 x 8192 characters, UTF-8) with their sources
    max_body_bytes: int = 4 * 1024 * 1024
    # webhooks: deliver to private, loopback and link-local addresses too
    webhooks_allow_private: bool = False
    # webhooks: seconds one attempt may take in all (resolve, connect, send, the answer's
    # status and headers), however the receiver dribbles its answer
    webhooks_timeout: float = 10.0
    # webhooks: the deliverer's connections in use at once, and the most one project may hold
    webhooks_connections: int = 100
    webhooks_project_connections: int = 10
    # webhooks: the first and the longest wait before retrying a failed delivery (seconds)
    webhooks_backoff_min: float = 1.0
    webhooks_backoff_max: float = 60.0
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        s = cls()
        values: dict[str, object] = {}
        if v := env.get("DATABASE_URL"):
            values["database_url"] = v
        if v := env.get("MEMQL_READ_DATABASE_URL"):
            values["read_database_url"] = v
        if v := env.get("MEMQL_READ_WAIT_SECONDS"):
            values["read_wait_seconds"] = _seconds("MEMQL_READ_WAIT_SECONDS", v)
        if v := env.get("MEMQL_DATA_DIR"):
            values["data_dir"] = Path(v).expanduser()
        if v := env.get("REDIS_URL"):
            values["redis_url"] = v
        if v := env.get("MEMQL_EMBEDDER"):
            values["embedder"] = v.strip().lower()
        for name in ("url", "model", "api_key"):
            if v := env.get(f"MEMQL_EMBEDDINGS_{name.upper()}"):
                values[f"embeddings_{name}"] = v
        if v := env.get("MEMQL_EMBEDDINGS_DIMENSIONS"):
            values["embeddings_dimensions"] = _int("MEMQL_EMBEDDINGS_DIMENSIONS", v, minimum=1)
        if v := env.get("MEMQL_EMBEDDINGS_TIMEOUT"):
            try:
                values["embeddings_timeout"] = float(v)
            except ValueError:
                raise ConfigurationError(
                    f"MEMQL_EMBEDDINGS_TIMEOUT={v!r} is not a number"
                ) from None
        if v := env.get("MEMQL_EMBEDDINGS_RUNTIME"):
            values["embeddings_runtime"] = v.strip().lower()
        if v := env.get("MEMQL_HOST"):
            values["host"] = v
        if v := env.get("MEMQL_PORT"):
            values["port"] = _int("MEMQL_PORT", v, minimum=0)
        if v := env.get("MEMQL_ABSORB_THRESHOLD"):
            values["absorb_threshold"] = _fraction("MEMQL_ABSORB_THRESHOLD", v)
        if v := env.get("MEMQL_NEAR_DUPLICATE_THRESHOLD"):
            values["near_duplicate_threshold"] = _fraction("MEMQL_NEAR_DUPLICATE_THRESHOLD", v)
        if v := env.get("MEMQL_RECALL_WEIGHTS"):
            values["recall_weights"] = parse_weights(v)
        if v := env.get("MEMQL_GRAPHIQL"):
            values["graphiql"] = _bool("MEMQL_GRAPHIQL", v)
        if v := env.get("MEMQL_INTROSPECTION"):
            values["introspection"] = _bool("MEMQL_INTROSPECTION", v)
        if v := env.get("MEMQL_CORS_ORIGINS"):
            values["cors_origins"] = parse_origins(v)
        if v := env.get("MEMQL_BATCH_MAX"):
            values["batch_max"] = _int("MEMQL_BATCH_MAX", v, minimum=0)
        if v := env.get("MEMQL_PERSISTED_QUERIES"):
            values["persisted_queries"] = _int("MEMQL_PERSISTED_QUERIES", v, minimum=0)
        if v := env.get("MEMQL_MAX_DOCUMENT_BYTES"):
            values["max_document_bytes"] = _int("MEMQL_MAX_DOCUMENT_BYTES", v, minimum=1024)
        if v := env.get("MEMQL_METRICS_PORT"):
            values["metrics_port"] = _int("MEMQL_METRICS_PORT", v, minimum=1)
        if v := env.get("MEMQL_METRICS_TOKEN"):
            values["metrics_token"] = v.strip()
        for consumer in ("client", "agent"):
            name = f"MEMQL_{consumer.upper()}_GRANT"
            if v := env.get(name):
                values[f"{consumer}_grant"] = _grant(name, v)
        if v := env.get("MEMQL_ACCESS_POLICY"):
            values["access_policy"] = v.strip()
        if v := env.get("MEMQL_QUERY_VECTORS"):
            values["query_vectors"] = _int("MEMQL_QUERY_VECTORS", v, minimum=0)
        if v := env.get("MEMQL_POOL_MAX_SIZE"):
            values["pool_max_size"] = _int("MEMQL_POOL_MAX_SIZE", v, minimum=1)
        if v := env.get("MEMQL_POOL_TIMEOUT_SECONDS"):
            values["pool_timeout_seconds"] = _seconds("MEMQL_POOL_TIMEOUT_SECONDS", v)
        if v := env.get("MEMQL_POOL_PROJECT_SHARE"):
            values["pool_project_share"] = _fraction("MEMQL_POOL_PROJECT_SHARE", v)
        if v := env.get("MEMQL_REQUEST_TIMEOUT_SECONDS"):
            values["request_timeout_seconds"] = _seconds("MEMQL_REQUEST_TIMEOUT_SECONDS", v)
        for name in ("RATE_PER_KEY", "RATE_PER_PROJECT"):
            if v := env.get(f"MEMQL_{name}"):
                values[name.lower()] = _rate(f"MEMQL_{name}", v)
        if v := env.get("MEMQL_RATE_BURST_SECONDS"):
            values["rate_burst_seconds"] = _seconds("MEMQL_RATE_BURST_SECONDS", v)
        if v := env.get("MEMQL_SUBSCRIBER_QUEUE"):
            values["subscriber_queue"] = _int("MEMQL_SUBSCRIBER_QUEUE", v, minimum=1)
        if v := env.get("MEMQL_AUTH_RECHECK_SECONDS"):
            values["auth_recheck_seconds"] = _seconds("MEMQL_AUTH_RECHECK_SECONDS", v)
        if v := env.get("MEMQL_MAX_BODY_BYTES"):
            values["max_body_bytes"] = _int("MEMQL_MAX_BODY_BYTES", v, minimum=1024)
        if v := env.get("MEMQL_WEBHOOKS_ALLOW_PRIVATE"):
            values["webhooks_allow_private"] = _bool("MEMQL_WEBHOOKS_ALLOW_PRIVATE", v)
        for name in ("timeout", "backoff_min", "backoff_max"):
            env_name = f"MEMQL_WEBHOOKS_{name.upper()}"
            if v := env.get(env_name):
                values[f"webhooks_{name}"] = _seconds(env_name, v)
        for name in ("connections", "project_connections"):
            env_name = f"MEMQL_WEBHOOKS_{name.upper()}"
            if v := env.get(env_name):
                values[f"webhooks_{name}"] = _int(env_name, v, minimum=1)
        s = replace(s, **values)  # type: ignore[arg-type]
        s.validate()
        return s

    @property
    def project_slots(self) -> int:
        """Connections one project's requests may hold or wait for at once."""
        return max(1, math.floor(self.pool_max_size * self.pool_project_share))

    @property
    def embedder_config(self) -> EmbedderConfig:
        return EmbedderConfig(
            provider=self.embedder,
            model=self.embeddings_model,
            url=self.embeddings_url,
            dimensions=self.embeddings_dimensions,
            api_key=self.embeddings_api_key,
            timeout=self.embeddings_timeout,
            runtime=self.embeddings_runtime,
        )

    def validate(self) -> None:
        if self.batch_max > BATCH_MAX_LIMIT:
            raise ConfigurationError(
                f"MEMQL_BATCH_MAX={self.batch_max} exceeds {BATCH_MAX_LIMIT} operations"
            )
        if self.metrics_port is not None and self.metrics_port == self.port:
            raise ConfigurationError("MEMQL_METRICS_PORT must differ from MEMQL_PORT")
        if self.embedder not in ("local", "openai", "tei"):
            raise ConfigurationError(
                f"MEMQL_EMBEDDER={self.embedder!r} is not one of local, openai, tei"
            )
        if self.embedder != "local" and not (self.embeddings_url and self.embeddings_model):
            raise ConfigurationError(
                f"MEMQL_EMBEDDER={self.embedder} needs MEMQL_EMBEDDINGS_URL and"
                " MEMQL_EMBEDDINGS_MODEL"
            )
        if self.read_database_url is not None and self.database_url is None:
            raise ConfigurationError(
                "MEMQL_READ_DATABASE_URL needs DATABASE_URL: the embedded PostgreSQL has no standby"
            )
        if self.embeddings_timeout <= 0:
            raise ConfigurationError("MEMQL_EMBEDDINGS_TIMEOUT must be positive")
        if self.embeddings_runtime not in ("auto", "openvino", "onnxruntime"):
            raise ConfigurationError(
                f"MEMQL_EMBEDDINGS_RUNTIME={self.embeddings_runtime!r} is not one of auto,"
                " openvino, onnxruntime"
            )
        if self.webhooks_project_connections > self.webhooks_connections:
            raise ConfigurationError(
                "MEMQL_WEBHOOKS_PROJECT_CONNECTIONS must not exceed MEMQL_WEBHOOKS_CONNECTIONS"
            )
        if min(self.webhooks_connections, self.webhooks_project_connections) < 1:
            raise ConfigurationError("webhook connections must be at least 1")
        if self.webhooks_backoff_min > self.webhooks_backoff_max:
            raise ConfigurationError(
                "MEMQL_WEBHOOKS_BACKOFF_MIN must not exceed MEMQL_WEBHOOKS_BACKOFF_MAX"
            )
        if not self.near_duplicate_threshold <= self.absorb_threshold:
            raise ConfigurationError(
                "MEMQL_NEAR_DUPLICATE_THRESHOLD must not exceed MEMQL_ABSORB_THRESHOLD"
            )


_WEIGHT_NAMES = {
    "vector": "vector",
    "lexical": "lexical",
    "recency": "recency",
    "pinned": "pinned",
    "half_life_days": "recency_half_life_days",
}


def parse_weights(raw: str) -> Weights:
    """`vector=0.76,lexical=0.2,recency=0.02,pinned=0.02[,half_life_days=90]`; unnamed weights
    are 0 and the half-life defaults to 90 days, as in the default weights."""
    name = "MEMQL_RECALL_WEIGHTS"
    values: dict[str, float] = {
        "vector": 0.0,
        "lexical": 0.0,
        "recency": 0.0,
        "pinned": 0.0,
        "recency_half_life_days": 90.0,
    }
    for part in raw.split(","):
        key, sep, number = part.partition("=")
        field_name = _WEIGHT_NAMES.get(key.strip())
        if not sep or field_name is None:
            raise ConfigurationError(
                f"{name}={raw!r}: expected name=value pairs with names {', '.join(_WEIGHT_NAMES)}"
            )
        try:
            values[field_name] = float(number)
        except ValueError:
            raise ConfigurationError(
                f"{name}={raw!r}: {number.strip()!r} is not a number"
            ) from None
    try:
        return Weights(**values)
    except ValueError as exc:
        raise ConfigurationError(f"{name}={raw!r}: {exc}") from None


def parse_origins(raw: str) -> tuple[str, ...]:
    """`https://app.example,http://localhost:5173`: exact origins, in the form browsers send
    them in `Origin` (lowercase, default ports left out). No wildcard: each site is named."""
    from strawberry.http.websocket_origin import normalize_allowed_origins

    listed = [part.strip() for part in raw.split(",") if part.strip()]
    if "*" in listed:
        raise ConfigurationError(
            "MEMQL_CORS_ORIGINS: list exact origins (https://app.example), not '*'"
        )
    try:
        return tuple(sorted(normalize_allowed_origins(listed)))
    except ValueError as exc:
        raise ConfigurationError(f"MEMQL_CORS_ORIGINS: {exc}") from None


def _int(name: str, raw: str, *, minimum: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigurationError(f"{name}={raw!r} must be at least {minimum}")
    return value


def _rate(name: str, raw: str) -> float:
    """Requests a second, 0 or more (0: not limited)."""
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number") from None
    if not 0.0 <= value < float("inf"):
        raise ConfigurationError(f"{name}={raw!r} must be 0 (off) or a rate a second")
    return value


def _fraction(name: str, raw: str) -> float:
    return _number(name, raw, 1.0)


def _seconds(name: str, raw: str) -> float:
    return _number(name, raw, 3600.0, " seconds")


def _number(name: str, raw: str, maximum: float, unit: str = "") -> float:
    """A number in (0, maximum]."""
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number") from None
    if not 0.0 < value <= maximum:
        raise ConfigurationError(f"{name}={raw!r} must be in (0, {maximum:g}]{unit}")
    return value


def _grant(name: str, raw: str) -> Grant:
    try:
        return parse_grant(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name}: {exc}") from None


def _bool(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name}={raw!r} is not a boolean (true/false)")
