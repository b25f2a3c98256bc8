"""One validated settings object, read from the environment when asked, never at import time.

Each setting is declared once, on its field: the environment variable that sets it, the parser
that reads it (its type, its bounds, its allowed values) and what it means. `Settings.from_env`
reads every declared variable in one loop, and the configuration table of the documentation is
printed from the same declarations (`python -m memql.settings --markdown`; a unit test holds the
page to it). A field no variable sets says why (`fixed`).
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar, overload

import platformdirs

from memql.errors import ConfigurationError
from memql.model import Access, EmbedderConfig, Grant, Weights, parse_grant

T = TypeVar("T")

#: reads one variable's text: `(variable, text) -> value`, or a `ConfigurationError` whose one
#: line names the variable and the text
Parser = Callable[[str, str], T]

DEFAULT_CLIENT_GRANT = Grant(user=Access.READ_WRITE, project=Access.READ)
DEFAULT_AGENT_GRANT = Grant(user=Access.READ_WRITE, project=Access.READ_WRITE)


# a batch runs its operations concurrently on one request's credentials; beyond this it is
# a denial of service, not a convenience
BATCH_MAX_LIMIT = 100

# the connections each instance opens at start and keeps (`Settings.pool_min_size`)
POOL_KEPT = 2


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
    # a GraphQL document's shape, refused before validation, whose work grows faster than the
    # document (graphql/shape.py): selections in one selection set, selections of one response
    # key in one set, and fields once every fragment is expanded where it is spread
    selections_per_set: int = 200
    key_repeats: int = 20
    expanded_fields: int = 2000


LIMITS = Limits()


# ---- the parsers: one per kind of value -------------------------------------------------------


def text(name: str, raw: str) -> str:
    """Taken as it is (a URL, a host, a key)."""
    return raw


def stripped(name: str, raw: str) -> str:
    """Taken without surrounding blanks (a token, `module:function`)."""
    return raw.strip()


def path(name: str, raw: str) -> Path:
    """A file system path; `~` is the user's home."""
    return Path(raw).expanduser()


def choice(*allowed: str) -> Parser[str]:
    """One of `allowed`, in any case."""

    def parse(name: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            raise ConfigurationError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        return value

    return parse


def integer(*, minimum: int, maximum: int | None = None) -> Parser[int]:
    """A whole number in [minimum, maximum]."""

    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigurationError(f"{name}={raw!r} is not an integer") from None
        if value < minimum:
            raise ConfigurationError(f"{name}={raw!r} must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise ConfigurationError(f"{name}={raw!r} must be at most {maximum}")
        return value

    return parse


def boolean(name: str, raw: str) -> bool:
    """`true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`)."""
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name}={raw!r} is not a boolean (true/false)")


def _float(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number") from None


def _positive(maximum: float, unit: str = "") -> Parser[float]:
    """A number in (0, maximum]."""

    def parse(name: str, raw: str) -> float:
        value = _float(name, raw)
        if not 0.0 < value <= maximum:
            raise ConfigurationError(f"{name}={raw!r} must be in (0, {maximum:g}]{unit}")
        return value

    return parse


#: a share or a similarity, in (0, 1]
fraction = _positive(1.0)
#: a duration, in (0, 3600] seconds
seconds = _positive(3600.0, " seconds")


def rate(name: str, raw: str) -> float:
    """Requests a second, 0 or more (0: not limited)."""
    value = _float(name, raw)
    if not 0.0 <= value < float("inf"):
        raise ConfigurationError(f"{name}={raw!r} must be 0 (off) or a rate a second")
    return value


def grant(name: str, raw: str) -> Grant:
    """`user=<access>,project=<access>`, each `none`, `read` or `read-write`."""
    try:
        return parse_grant(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name}: {exc}") from None


_WEIGHT_NAMES = {
    "vector": "vector",
    "lexical": "lexical",
    "recency": "recency",
    "pinned": "pinned",
    "half_life_days": "recency_half_life_days",
}


def weights(name: str, raw: str) -> Weights:
    """`vector=0.76,lexical=0.2,recency=0.02,pinned=0.02[,half_life_days=90]`; unnamed weights
    are 0 and the half-life defaults to 90 days, as in the default weights."""
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


def origins(name: str, raw: str) -> tuple[str, ...]:
    """`https://app.example,http://localhost:5173`: exact origins, in the form browsers send
    them in `Origin` (lowercase, default ports left out). No wildcard: each site is named."""
    from strawberry.http.websocket_origin import normalize_allowed_origins

    listed = [part.strip() for part in raw.split(",") if part.strip()]
    if "*" in listed:
        raise ConfigurationError(f"{name}: list exact origins (https://app.example), not '*'")
    try:
        return tuple(sorted(normalize_allowed_origins(listed)))
    except ValueError as exc:
        raise ConfigurationError(f"{name}: {exc}") from None


TRACE_EXPORTERS = ("otlp", "console")


def trace_exporters(name: str, raw: str) -> tuple[str, ...]:
    """Comma-separated exporter names (`otlp`, `console`), or `none`."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in raw.split(",") if n.strip()))
    if names == ("none",):
        return names
    for n in names:
        if n not in TRACE_EXPORTERS:
            raise ConfigurationError(
                f"{name}={raw!r}: {n!r} is not one of {', '.join(TRACE_EXPORTERS)} (or none)"
            )
    return names


@dataclass(frozen=True)
class OperatorToken:
    """One operator of the admin API: its name (recorded with every change it makes) and the
    SHA-256 of its token. The token itself is never configured, so neither the environment
    nor a settings dump holds a credential."""

    name: str
    digest: bytes = field(repr=False)


#: an operator's name: what the audit log records as the actor
OPERATOR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
_OPERATOR_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


def operator_tokens(name: str, raw: str) -> tuple[OperatorToken, ...]:
    """`NAME:sha256:HEX,...`: each operator's name and the SHA-256 of its token, as
    `memql admin-token NAME` prints them. An entry is never echoed in a refusal: a token
    pasted here by mistake stays out of messages and logs."""
    found: list[OperatorToken] = []
    for number, entry in enumerate((e.strip() for e in raw.split(",")), start=1):
        if not entry:
            continue
        who, _, digest = entry.partition(":")
        hashed = _OPERATOR_DIGEST.fullmatch(digest.strip().lower())
        if hashed is None or not OPERATOR_NAME.fullmatch(who.strip()):
            raise ConfigurationError(
                f"{name}: entry {number} is not NAME:sha256:HEX (a name of letters, digits and"
                " ._@-, then the SHA-256 of the token in 64 hex digits); make one with"
                " `memql admin-token NAME`"
            )
        token = OperatorToken(who.strip(), bytes.fromhex(hashed.group(1)))
        if any(t.name == token.name for t in found):
            raise ConfigurationError(f"{name}: entry {number} repeats an operator's name")
        if any(t.digest == token.digest for t in found):
            raise ConfigurationError(f"{name}: entry {number} repeats another entry's token")
        found.append(token)
    if not found:
        raise ConfigurationError(f"{name} names no operator: leave it unset for none")
    return tuple(found)


# ---- the declarations ------------------------------------------------------------------------

_DECLARED = "memql.setting"


@dataclass(frozen=True)
class Variable:
    """How the environment sets one field: an unset or empty variable leaves its default."""

    name: str
    parse: Parser[Any]
    # one line of the configuration table
    meaning: str
    # the table's default column; `{default}` is the field's default as the table shows it
    shown: str = "{default}"


@dataclass(frozen=True)
class Fixed:
    """A field no environment variable sets (code that builds `Settings` may), and why."""

    why: str


@overload
def setting(
    variable: str, parse: Parser[T], meaning: str, *, default: T, shown: str = ...
) -> T: ...
@overload
def setting(
    variable: str, parse: Parser[T], meaning: str, *, factory: Callable[[], T], shown: str
) -> T: ...
def setting(
    variable: str,
    parse: Parser[Any],
    meaning: str,
    *,
    default: Any = MISSING,
    factory: Any = MISSING,
    shown: str = "{default}",
) -> Any:
    """A field set by `variable`, read by `parse`; `meaning` is its line in the table. A
    default made by `factory` (one that depends on the machine) is shown by `shown` alone."""
    if factory is not MISSING and "{default}" in shown:
        raise TypeError(f"{variable}: a default made by a factory needs its own `shown` text")
    if "|" in meaning + shown or "\n" in meaning + shown:
        raise TypeError(f"{variable}: the table's cells hold one line without '|'")
    metadata = {_DECLARED: Variable(variable, parse, meaning, shown)}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@overload
def fixed(*, why: str, default: T) -> T: ...
@overload
def fixed(*, why: str, factory: Callable[[], T]) -> T: ...
def fixed(*, why: str, default: Any = MISSING, factory: Any = MISSING) -> Any:
    """A field no environment variable sets; `why` says why not."""
    metadata = {_DECLARED: Fixed(why)}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def _user_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("memql"))


@dataclass(frozen=True)
class Settings:
    """What one memql instance runs with. Each field is declared with `setting` (the variable
    that sets it, its parser, its meaning) or `fixed` (set only by code, and why)."""

    database_url: str | None = setting(
        "DATABASE_URL",
        text,
        "PostgreSQL with pgvector",
        default=None,
        shown="{default}: embedded PostgreSQL in `MEMQL_DATA_DIR`",
    )
    read_database_url: str | None = setting(
        "MEMQL_READ_DATABASE_URL",
        text,
        "hot standbys of `DATABASE_URL` for recall, lists, context blocks and counts (libpq"
        " multi-host allowed: `postgresql://r1:5432,r2:5432/memql`; its parameters override"
        " `DATABASE_URL`'s, so it may name only the hosts; `target_session_attrs` defaults to"
        " `prefer-standby`). Each caller's own writes stay visible to its next read, on any"
        " instance (through `REDIS_URL` when set): see [scale.md](scale.md#replicas)",
        default=None,
        shown="{default}: every read on the primary",
    )
    read_wait_seconds: float = setting(
        "MEMQL_READ_WAIT_SECONDS",
        seconds,
        "how long a read waits for the standby to replay the caller's last write before it"
        " reads the primary instead",
        default=0.05,
    )
    data_dir: Path = setting(
        "MEMQL_DATA_DIR",
        path,
        "where the embedded database lives; its PostgreSQL also reads `pg/memql.conf` there"
        " (written when it is missing: `shared_buffers` of an eighth of the machine's memory,"
        " 128 MB to 1 GB; edit it and restart to change)",
        factory=_user_data_dir,
        shown="the per-user data directory (`~/.local/share/memql`)",
    )
    embedder: str = setting(
        "MEMQL_EMBEDDER",
        choice("local", "openai", "tei"),
        "embedding provider: `local`, `openai` (any OpenAI-compatible `/v1/embeddings`) or"
        " `tei` (text-embeddings-inference)",
        default="local",
        shown="{default} (all-MiniLM-L6-v2 from the installed model package)",
    )
    # what runs the local model (embeddings/local.py)
    embeddings_runtime: str = setting(
        "MEMQL_EMBEDDINGS_RUNTIME",
        choice("auto", "openvino", "onnxruntime"),
        "what runs the local model: `openvino` (bfloat16 where the CPU computes it, AVX-512"
        " BF16 or AMX; float32 elsewhere), `onnxruntime` (float32), or `auto`",
        default="auto",
        shown="{default}: OpenVINO on a CPU with bfloat16, ONNX Runtime elsewhere",
    )
    # service/query_vectors.py
    query_vectors: int = setting(
        "MEMQL_QUERY_VECTORS",
        integer(minimum=0),
        "query vectors kept per instance (a question asked again in a project skips the"
        " model; `0`: none)",
        default=4096,
    )
    embeddings_url: str | None = setting(
        "MEMQL_EMBEDDINGS_URL",
        text,
        "remote embedder: API base (`https://api.openai.com/v1`, `http://tei:80`)",
        default=None,
        shown="required for `openai`/`tei`",
    )
    embeddings_model: str | None = setting(
        "MEMQL_EMBEDDINGS_MODEL",
        text,
        "remote embedder: model name",
        default=None,
        shown="required for `openai`/`tei`",
    )
    embeddings_dimensions: int | None = setting(
        "MEMQL_EMBEDDINGS_DIMENSIONS",
        integer(minimum=1),
        "remote embedder: dimensions to ask for (`openai`)",
        default=None,
    )
    embeddings_api_key: str | None = setting(
        "MEMQL_EMBEDDINGS_API_KEY", text, "remote embedder: bearer key", default=None
    )
    # a request abandoned is retried
    embeddings_timeout: float = setting(
        "MEMQL_EMBEDDINGS_TIMEOUT",
        seconds,
        "seconds per remote embedding request (3 attempts with backoff)",
        default=10.0,
    )
    # None means the service's calibrated default
    recall_weights: Weights | None = setting(
        "MEMQL_RECALL_WEIGHTS",
        weights,
        "recall fusion, e.g. `vector=0.76,lexical=0.20,recency=0.02,pinned=0.02,half_life_days=90`",
        default=None,
        shown="{default}: those values",
    )
    host: str = setting("MEMQL_HOST", text, "listen address", default="127.0.0.1")
    port: int = setting("MEMQL_PORT", integer(minimum=0), "listen port", default=8000)
    absorb_threshold: float = setting(
        "MEMQL_ABSORB_THRESHOLD",
        fraction,
        "cosine similarity from which a same-kind save is absorbed",
        default=0.95,
    )
    near_duplicate_threshold: float = setting(
        "MEMQL_NEAR_DUPLICATE_THRESHOLD",
        fraction,
        "cosine similarity from which similar memories are reported",
        default=0.80,
    )
    graphiql: bool = setting("MEMQL_GRAPHIQL", boolean, "serve GraphiQL", default=True)
    introspection: bool = setting(
        "MEMQL_INTROSPECTION", boolean, "allow introspection", default=True
    )
    cors_origins: tuple[str, ...] = setting(
        "MEMQL_CORS_ORIGINS",
        origins,
        "comma-separated exact origins (`https://app.example,http://localhost:5173`) whose"
        " pages may call `/graphql` and `/mcp` and open websockets on `/graphql`",
        default=(),
        shown="{default}: only same-origin pages and non-browser clients",
    )
    access_policy: str | None = setting(
        "MEMQL_ACCESS_POLICY",
        stripped,
        "`module:function`, the access policy",
        default=None,
        shown="the per-consumer grants below",
    )
    client_grant: Grant = setting(
        "MEMQL_CLIENT_GRANT",
        grant,
        "what a client key or browser token may do without `MEMQL_ACCESS_POLICY`, e.g."
        " `user=read,project=none`",
        default=DEFAULT_CLIENT_GRANT,
    )
    agent_grant: Grant = setting(
        "MEMQL_AGENT_GRANT",
        grant,
        "what an agent key may do without `MEMQL_ACCESS_POLICY`",
        default=DEFAULT_AGENT_GRANT,
    )
    pool_min_size: int = fixed(
        default=POOL_KEPT,
        why="the connections each instance opens at start and keeps: the pool grows on demand"
        " up to `MEMQL_POOL_MAX_SIZE` and shrinks back, so there is nothing to tune (tests and"
        " benchmarks on small databases set 1 in code)",
    )
    pool_max_size: int = setting(
        "MEMQL_POOL_MAX_SIZE",
        integer(minimum=POOL_KEPT),
        f"database connections per instance (at least the {POOL_KEPT} it keeps open)",
        default=10,
    )
    pool_timeout_seconds: float = setting(
        "MEMQL_POOL_TIMEOUT_SECONDS",
        seconds,
        "how long a request waits for a database connection before it is answered with 503"
        " `SERVICE_UNAVAILABLE` (a database outage, or every connection busy)",
        default=5.0,
    )
    pool_project_share: float = setting(
        "MEMQL_POOL_PROJECT_SHARE",
        fraction,
        "the fraction of the pool one project's requests may hold or wait for at once, so one"
        " busy project cannot make every other wait; past its share a request waits (within"
        " `MEMQL_POOL_TIMEOUT_SECONDS`, then 503). Subscriptions starting read the event log"
        " two at a time per project and wait up to 30 s for their turn, so many starting at"
        " once queue instead of failing. A server for one project only may set `1`",
        default=0.5,
    )
    # each of an operation's statements is cancelled by PostgreSQL at the deadline
    # (statement_timeout)
    request_timeout_seconds: float = setting(
        "MEMQL_REQUEST_TIMEOUT_SECONDS",
        seconds,
        "the time one GraphQL operation may spend with the database in all: every checkout"
        " waits at most until this deadline, each statement is cancelled by PostgreSQL at it"
        " (`statement_timeout`), and what has not started by then fails with `REQUEST_TIMEOUT`"
        " (ask for less in one request)",
        default=30.0,
    )
    rate_per_key: float = setting(
        "MEMQL_RATE_PER_KEY",
        rate,
        "requests a second one credential may make (an API key; a browser token's user), per"
        " instance; over it: HTTP 429 with `Retry-After` and `TOO_MANY_REQUESTS` (a"
        " websocket's `connection_init`: close 1013). Each HTTP request, websocket operation"
        " and MCP call counts one. `0`: off",
        default=0.0,
    )
    rate_per_project: float = setting(
        "MEMQL_RATE_PER_PROJECT",
        rate,
        "the same for all the credentials of one project together. `0`: off",
        default=0.0,
    )
    rate_burst_seconds: float = setting(
        "MEMQL_RATE_BURST_SECONDS",
        seconds,
        "a rate's burst: a caller idle for a while may send this many seconds' worth of its"
        " rate at once",
        default=2.0,
    )
    max_request_cost: int = setting(
        "MEMQL_MAX_REQUEST_COST",
        integer(minimum=0),
        "the most one GraphQL request (all the operations of a batch together) may cost, in"
        " points of event-loop work counted from its document before it runs (a field resolved"
        " 1, a memory read 10, a call of the service 150, an operation 50; for every alias and"
        " every item of a page or recall above it; 3 to 5 µs a point on a 2-core machine,"
        " `graphql/budgets.py`); over it: `BAD_USER_INPUT`, nothing runs. 30 aliased pages of"
        " 200 cost 137,000; 100 memories saved with the Python client's full answer 36,000."
        " `0`: not bounded",
        default=50_000,
    )
    project_cost_at_once: int = setting(
        "MEMQL_PROJECT_COST_AT_ONCE",
        integer(minimum=0),
        "the points one project's GraphQL requests running at once on an instance may cost"
        " together (a costlier request runs alone); the next waits for its turn, first come"
        " first served, at most `MEMQL_POOL_TIMEOUT_SECONDS`, then HTTP 429"
        " `TOO_MANY_REQUESTS` with nothing run. Bounds how long one project's work keeps every"
        " other project's requests waiting on the instance's one event loop. Subscriptions'"
        " events and `/mcp` calls do not count. `0`: not shared",
        default=10_000,
    )
    redis_url: str | None = setting(
        "REDIS_URL",
        text,
        "the broadcast between instances (`redis://host:6379/0`), Redis behind Sentinel for"
        " failover (`redis+sentinel://s1:26379,s2:26379/<service>/0`; `rediss+sentinel://` for"
        " TLS): see [scale.md](scale.md#redis-sentinel), or a Redis Cluster, 7.0 or later, over"
        " sharded pub/sub (`redis+cluster://n1:6379,n2:6379/`, any nodes as seeds;"
        " `rediss+cluster://` for TLS): see [scale.md](scale.md#redis-cluster)",
        default=None,
        shown="{default}: in memory, one instance",
    )
    subscriber_queue: int = setting(
        "MEMQL_SUBSCRIBER_QUEUE",
        integer(minimum=1),
        "live events a subscriber may have waiting before it is closed as too slow",
        default=1000,
    )
    auth_recheck_seconds: float = setting(
        "MEMQL_AUTH_RECHECK_SECONDS",
        seconds,
        "how often a live subscription checks its credentials again on a schedule (changes"
        " made in the database reach it before its next delivery anyway)",
        default=3.0,
    )
    # 4 MiB holds a full batch of the longest memories (100 x 8192 characters, UTF-8) with
    # their sources
    max_body_bytes: int = setting(
        "MEMQL_MAX_BODY_BYTES",
        integer(minimum=1024),
        "the largest HTTP request body (`/graphql`, `/mcp`) or websocket message",
        default=4 * 1024 * 1024,
        shown="{default} (4 MiB: a full batch of 100 memories of 8192 characters)",
    )
    max_document_bytes: int = setting(
        "MEMQL_MAX_DOCUMENT_BYTES",
        integer(minimum=1024),
        "the longest GraphQL document text (comments and whitespace count), refused before parsing",
        default=64 * 1024,
    )
    batch_max: int = setting(
        "MEMQL_BATCH_MAX",
        integer(minimum=0, maximum=BATCH_MAX_LIMIT),
        "operations one request may batch (a JSON array); `0` turns batching off; at most"
        f" {BATCH_MAX_LIMIT}",
        default=0,
        shown="{default} (off)",
    )
    persisted_queries: int = setting(
        "MEMQL_PERSISTED_QUERIES",
        integer(minimum=0),
        "automatic persisted queries each instance remembers per project (least recently used"
        " out first); `0` turns APQ off",
        default=1000,
    )
    metrics_port: int | None = setting(
        "MEMQL_METRICS_PORT",
        integer(minimum=1),
        "serve `/metrics` on this port (same host) instead of the API port",
        default=None,
        shown="{default}: on the API port",
    )
    metrics_token: str | None = setting(
        "MEMQL_METRICS_TOKEN",
        stripped,
        "bearer token `/metrics` requires",
        default=None,
        shown="{default}: no token",
    )
    # tracing (memql.tracing): the standard OpenTelemetry variables that turn it on; the SDK
    # reads the rest of OTEL_* itself (service name, sampler, headers, timeouts)
    traces_exporter: tuple[str, ...] = setting(
        "OTEL_TRACES_EXPORTER",
        trace_exporters,
        "tracing: comma-separated exporters, `otlp` (OTLP over HTTP) and/or `console`; set, it"
        " turns tracing on (the `tracing` extra); `none` keeps it off",
        default=(),
        shown="{default}: `otlp` once an OTLP endpoint is set",
    )
    otlp_endpoint: str | None = setting(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        stripped,
        "tracing: the OTLP/HTTP collector, e.g. `http://127.0.0.1:4318`; set, it turns tracing on",
        default=None,
        shown="{default}: tracing off",
    )
    otlp_traces_endpoint: str | None = setting(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        stripped,
        "tracing: the full URL spans are posted to (`.../v1/traces`); set, it turns tracing on",
        default=None,
    )
    otlp_protocol: str = setting(
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        choice("http/protobuf"),
        "tracing: the OTLP transport; memql exports OTLP over HTTP only",
        default="http/protobuf",
    )
    otel_sdk_disabled: bool = setting(
        "OTEL_SDK_DISABLED",
        boolean,
        "`true` turns tracing off whatever the other `OTEL_*` variables say",
        default=False,
    )
    admin_tokens: tuple[OperatorToken, ...] = setting(
        "MEMQL_ADMIN_TOKENS",
        operator_tokens,
        "the operators of the admin API (`/admin/graphql`): comma-separated `NAME:sha256:HEX`,"
        " each an operator's name and the SHA-256 of its token, as `memql admin-token NAME`"
        " prints them; the tokens themselves are never configured",
        default=(),
        shown="{default}: the admin API is off (`/admin/graphql` answers 404)",
    )
    webhooks_allow_private: bool = setting(
        "MEMQL_WEBHOOKS_ALLOW_PRIVATE",
        boolean,
        "let webhooks go to private, loopback and link-local addresses",
        default=False,
    )
    # however the receiver dribbles its answer
    webhooks_timeout: float = setting(
        "MEMQL_WEBHOOKS_TIMEOUT",
        seconds,
        "seconds one webhook attempt may take in all (resolve, connect, send, status and headers)",
        default=10.0,
    )
    webhooks_connections: int = setting(
        "MEMQL_WEBHOOKS_CONNECTIONS",
        integer(minimum=1),
        "webhook attempts in flight at once",
        default=100,
    )
    webhooks_project_connections: int = setting(
        "MEMQL_WEBHOOKS_PROJECT_CONNECTIONS",
        integer(minimum=1),
        "webhook attempts of one project in flight at once (at most `MEMQL_WEBHOOKS_CONNECTIONS`)",
        default=10,
    )
    webhooks_backoff_min: float = setting(
        "MEMQL_WEBHOOKS_BACKOFF_MIN",
        seconds,
        "seconds before the first retry of a failed webhook delivery, doubling up to"
        " `MEMQL_WEBHOOKS_BACKOFF_MAX`",
        default=1.0,
    )
    webhooks_backoff_max: float = setting(
        "MEMQL_WEBHOOKS_BACKOFF_MAX",
        seconds,
        "the longest wait before retrying a failed webhook delivery, in seconds",
        default=60.0,
    )
    limits: Limits = fixed(
        factory=Limits,
        why="the bounds every caller meets are the API's contract, the same on every server"
        " (GraphQL argument defaults and MCP tool schemas show them): code, not configuration",
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings `env` (the process's environment by default) declares; an unset or
        empty variable leaves its default. Any bad value is a `ConfigurationError` of one line
        naming its variable."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f, variable in variables():
            if raw := env.get(variable.name):
                values[f.name] = variable.parse(variable.name, raw)
        settings = cls(**values)
        settings.validate()
        return settings

    @property
    def project_slots(self) -> int:
        """Connections one project's requests may hold or wait for at once."""
        return max(1, math.floor(self.pool_max_size * self.pool_project_share))

    @property
    def tracing(self) -> tuple[str, ...]:
        """The span exporters the `OTEL_*` variables ask for; () while tracing is off."""
        if self.otel_sdk_disabled or self.traces_exporter == ("none",):
            return ()
        if self.traces_exporter:
            return self.traces_exporter
        if self.otlp_endpoint or self.otlp_traces_endpoint:
            return ("otlp",)
        return ()

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
        """The rules between settings (each one's own bounds are its parser's)."""
        v = variable_of
        if self.metrics_port is not None and self.metrics_port == self.port:
            raise ConfigurationError(f"{v('metrics_port')} must differ from {v('port')}")
        if self.embedder != "local" and not (self.embeddings_url and self.embeddings_model):
            raise ConfigurationError(
                f"{v('embedder')}={self.embedder} needs {v('embeddings_url')} and"
                f" {v('embeddings_model')}"
            )
        if self.read_database_url is not None and self.database_url is None:
            raise ConfigurationError(
                f"{v('read_database_url')} needs {v('database_url')}: the embedded PostgreSQL"
                " has no standby"
            )
        for smaller, larger in (
            ("webhooks_project_connections", "webhooks_connections"),
            ("webhooks_backoff_min", "webhooks_backoff_max"),
            ("near_duplicate_threshold", "absorb_threshold"),
        ):
            if getattr(self, smaller) > getattr(self, larger):
                raise ConfigurationError(f"{v(smaller)} must not exceed {v(larger)}")


def declarations() -> Iterator[tuple[Field[Any], Variable | Fixed]]:
    """Every field of `Settings` with its declaration, in the order of the class."""
    for f in fields(Settings):
        declared = f.metadata.get(_DECLARED)
        if not isinstance(declared, Variable | Fixed):
            raise TypeError(f"Settings.{f.name} is declared with neither setting() nor fixed()")
        yield f, declared


def variables() -> Iterator[tuple[Field[Any], Variable]]:
    """The fields an environment variable sets, with their variables."""
    for f, declared in declarations():
        if isinstance(declared, Variable):
            yield f, declared


def variable_of(name: str) -> str:
    """The environment variable that sets the field `name`."""
    for f, variable in variables():
        if f.name == name:
            return variable.name
    raise KeyError(f"no environment variable sets Settings.{name}")


def parse_origins(raw: str) -> tuple[str, ...]:
    """Origins as the server reads them from `MEMQL_CORS_ORIGINS`."""
    return origins(variable_of("cors_origins"), raw)


# ---- the configuration table -----------------------------------------------------------------

TABLE_START = "<!-- settings-table: generated by `python -m memql.settings --write FILE` -->"
TABLE_END = "<!-- /settings-table -->"
_TABLE = re.compile(re.escape(TABLE_START) + r"\n(.*?)" + re.escape(TABLE_END), re.DOTALL)


def _shown(value: object) -> str:
    """A default as the table shows it."""
    if value is None:
        return "unset"
    if value == ():
        return "none"
    if isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, float):
        shown = f"{value:g}"
    elif isinstance(value, Grant):
        shown = f"user={value.user.value},project={value.project.value}"
    else:
        shown = str(value)
    return f"`{shown}`"


def markdown_table() -> str:
    """The configuration table: one row per variable, in the order of the declarations."""
    rows = ["| variable | meaning | default |", "|---|---|---|"]
    for f, variable in variables():
        default = "" if f.default is MISSING else _shown(f.default)
        rows.append(
            f"| `{variable.name}` | {variable.meaning} | {variable.shown.format(default=default)} |"
        )
    return "\n".join(rows) + "\n"


def table_in(page: str) -> str:
    """The table between the markers of `page` (`TABLE_START`, `TABLE_END`)."""
    found = _TABLE.search(page)
    if found is None:
        raise ValueError(f"no configuration table between {TABLE_START!r} and {TABLE_END!r}")
    return found.group(1).strip("\n") + "\n"


def with_table(page: str) -> str:
    """`page` with the table between its markers replaced by the declared one."""
    table_in(page)
    # blank lines around it: Markdown ends a table at a blank line
    block = f"{TABLE_START}\n\n{markdown_table()}\n{TABLE_END}"
    return _TABLE.sub(lambda _: block, page, count=1)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m memql.settings", description="memql's settings, as declared."
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument(
        "--markdown", action="store_true", help="print the configuration table (Markdown)"
    )
    action.add_argument(
        "--write", metavar="FILE", help="replace the table between the markers in FILE"
    )
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(markdown_table())
        return 0
    page = Path(args.write)
    try:
        page.write_text(with_table(page.read_text(encoding="utf-8")), encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"memql.settings: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
