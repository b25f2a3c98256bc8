"""Domain objects: frozen dataclasses with no I/O."""

from __future__ import annotations

import enum
import typing
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memql.words import api

if TYPE_CHECKING:
    from memql.requests import Criteria


class Kind(enum.Enum):
    TOPICAL = "topical"
    EPISODIC = "episodic"
    OPERATIONAL = "operational"


class Scope(enum.Enum):
    USER = "user"
    PROJECT = "project"


class Access(enum.Enum):
    NONE = "none"
    READ = "read"
    READ_WRITE = "read-write"

    @property
    def can_read(self) -> bool:
        return self is not Access.NONE

    @property
    def can_write(self) -> bool:
        return self is Access.READ_WRITE


class Consumer(enum.Enum):
    AGENT = "agent"
    CLIENT = "client"


class InvalidationReason(enum.StrEnum):
    """Why a memory version is no longer live."""

    RETIRED = "retired"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"


class EventType(enum.StrEnum):
    """Every type of memory event, in the order a memory's life meets them."""

    CREATED = "memory.created"
    ABSORBED = "memory.absorbed"
    SUPERSEDED = "memory.superseded"
    RETIRED = "memory.retired"
    RESTORED = "memory.restored"
    ERASED = "memory.erased"


def or_list(values: Iterable[str], *, quote: str = "") -> str:
    """`a, b or c`: the values of an enum as a description lists them."""
    items = [f"{quote}{v}{quote}" for v in values]
    return f"{', '.join(items[:-1])} or {items[-1]}" if len(items) > 1 else "".join(items)


class SaveOutcome(enum.Enum):
    CREATED = "CREATED"
    ABSORBED = "ABSORBED"
    SUPERSEDED = "SUPERSEDED"


@dataclass(frozen=True)
class Grant:
    """What one request may do with each scope."""

    user: Access
    project: Access

    def for_scope(self, scope: Scope) -> Access:
        return self.user if scope is Scope.USER else self.project

    def readable_scopes(self) -> tuple[Scope, ...]:
        return tuple(s for s in Scope if self.for_scope(s).can_read)


def parse_access(value: str) -> Access:
    try:
        return Access(value.strip().lower())
    except ValueError:
        raise ValueError(f"{value!r} is not one of none, read, read-write") from None


def parse_grant(text: str) -> Grant:
    """`user=read-write,project=read` -> Grant. Both scopes must be named."""
    parts: dict[str, Access] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip().lower()
        if not sep or name not in ("user", "project") or name in parts:
            raise ValueError(f"{text!r} is not of the form user=<access>,project=<access>")
        parts[name] = parse_access(value)
    if set(parts) != {"user", "project"}:
        raise ValueError(f"{text!r} must name both user and project")
    return Grant(user=parts["user"], project=parts["project"])


@dataclass(frozen=True)
class JwtConfig:
    """The browser tokens a project trusts: one issuer, with an HS256 secret or a JWKS URL,
    and one audience."""

    issuer: str
    audience: str
    hs256_secret: str | None
    jwks_url: str | None


@dataclass(frozen=True)
class EmbedderConfig:
    """Which embedder turns text into vectors: `local` (the packaged model) or a remote
    provider (`openai`, `tei`) serving `model` at `url`."""

    provider: str = "local"
    model: str | None = None
    url: str | None = None
    dimensions: int | None = None
    api_key: str | None = None
    # seconds before one request to a remote embedder is abandoned (and retried)
    timeout: float = 10.0
    # what runs the local model: auto (OpenVINO bfloat16 where the CPU has it), openvino,
    # onnxruntime
    runtime: str = "auto"


@dataclass(frozen=True)
class Principal:
    """Who is asking: the per-request context every service call works from."""

    project_id: uuid.UUID
    project_name: str
    user_id: str
    consumer: Consumer
    grant: Grant
    # a server credential (API key) rather than a browser one; erasure needs it
    server_credential: bool = True
    # the API key it came with (None for a browser token): every transaction checks that the
    # key is still live and the project still entitled, whatever an instance has cached
    key_id: uuid.UUID | None = None
    # when that API key expires (None: never, or a browser token): from then on it is refused
    # as a revoked key is, and an open stream ends
    key_expires_at: datetime | None = None

    def owner_for(self, scope: Scope) -> str:
        """The owner id of rows in `scope`: the user, or '' for the shared project scope."""
        return self.user_id if scope is Scope.USER else ""


@dataclass(frozen=True)
class Memory:
    """One stored memory as every reader sees it: what it says (content, kind, key, category,
    pinned, its sources, when it happened), whose it is (project, scope, owner), its life
    (created, updated, expiring, invalidated and why, what it supersedes and what superseded
    it) and the model that embedded it. Its fields are `MEMORY_FIELDS`: the columns of
    `memories` and every format of a memory are derived from them."""

    id: uuid.UUID = field(metadata=api("New for every version of a memory."))
    project_id: uuid.UUID = field(metadata=api("The project it belongs to.", shown=False))
    scope: Scope = field(metadata=api("Whose it is. {Scope}"))
    owner_id: str = field(metadata=api("The user it belongs to ('' when shared).", shown=False))
    kind: Kind = field(metadata=api("What it is. {Kind}"))
    content: str = field(metadata=api("The statement."))
    key: str | None = field(
        metadata=api("Stable slug; saving with a live key supersedes that memory.")
    )
    category: str = field(metadata=api("A short label (`general` unless the save named one)."))
    pinned: bool = field(metadata=api("Put first in the context block."))
    source_thread_ids: tuple[str, ...] = field(
        metadata=api("Ids of the conversations it came from.", for_agents=False)
    )
    source: dict[str, Any] | None = field(
        metadata=api(
            "Provenance (tool, agent, message); never used for access decisions.",
            for_agents=False,
        )
    )
    created_by: str = field(metadata=api("The user whose request saved it.", shown=False))
    created_at: datetime = field(metadata=api("When memql learned it.", for_agents=False))
    updated_at: datetime = field(metadata=api("Refreshed when a near-duplicate is absorbed."))
    expires_at: datetime | None = field(
        metadata=api("When it stops applying (it then reads as expired); null: never.")
    )
    invalidated_at: datetime | None = field(
        metadata=api("Set when retired, superseded or expired.", for_agents=False)
    )
    invalidation_reason: InvalidationReason | None = field(metadata=api("{InvalidationReason}."))
    supersedes: uuid.UUID | None = field(
        metadata=api("The id of the version this one replaced.", for_agents=False)
    )
    superseded_by: uuid.UUID | None = field(
        metadata=api("The id of the version that replaced this one.", for_agents=False)
    )
    embedding_model: str = field(
        metadata=api("The model whose vector of it recall compares.", for_agents=False)
    )
    # when the event an episodic memory records happened (createdAt is when memql learned it)
    occurred_at: datetime | None = field(
        default=None,
        metadata=api(
            "When the event an episodic memory records happened (createdAt is when it was"
            " learned); null when not given."
        ),
    )

    def effective_invalidation(
        self, now: datetime
    ) -> tuple[datetime | None, InvalidationReason | None]:
        """An expired memory reads as invalidated at its expiry, with reason 'expired'."""
        if self.invalidated_at is None and self.expires_at is not None and self.expires_at <= now:
            return self.expires_at, InvalidationReason.EXPIRED
        return self.invalidated_at, self.invalidation_reason


@dataclass(frozen=True)
class NearDuplicate:
    memory: Memory
    similarity: float


@dataclass(frozen=True)
class SaveResult:
    outcome: SaveOutcome
    memory: Memory
    near_duplicates: tuple[NearDuplicate, ...] = ()
    superseded: Memory | None = None


@dataclass(frozen=True)
class Signals:
    """The parts of a recall score, each in [0, 1]. `redundancy` is not weighed in: a hit's
    cosine to the nearest in meaning of the hits ranked above it, which past 0.6 lowers its
    score (`db/recall.py`, rewordings give way); 0 for the first."""

    vector: float
    lexical: float
    recency: float
    pinned: float
    redundancy: float = 0.0


@dataclass(frozen=True)
class RecallHit:
    """One recalled memory; higher score = more relevant, in [0, 1]."""

    memory: Memory
    score: float
    signals: Signals


class OrderField(enum.Enum):
    CREATED_AT = "created_at"
    UPDATED_AT = "updated_at"


class SortDirection(enum.Enum):
    ASC = "asc"
    DESC = "desc"


@dataclass(frozen=True)
class Order:
    """How a list is sorted; the id breaks ties in the same direction."""

    field: OrderField = OrderField.CREATED_AT
    direction: SortDirection = SortDirection.DESC


@dataclass(frozen=True)
class Page:
    """One page of a list, in the list's order, with a cursor per memory."""

    memories: list[Memory]
    cursors: list[str]
    has_next_page: bool
    end_cursor: str | None = None
    has_previous_page: bool = False
    start_cursor: str | None = None
    # the filter the page was read with, to count every memory it admits
    criteria: Criteria | None = None


@dataclass(frozen=True)
class ContextItem:
    """What a context block shows of a memory (`Memory` has the same fields)."""

    kind: Kind
    content: str
    category: str
    pinned: bool
    occurred_at: datetime | None


@dataclass(frozen=True)
class ContextBlock:
    text: str
    count: int
    omitted: int


@dataclass(frozen=True)
class Project:
    id: uuid.UUID
    name: str
    memory_enabled: bool
    created_at: datetime


@dataclass(frozen=True)
class ApiKey:
    id: uuid.UUID
    project_id: uuid.UUID
    project_name: str
    prefix: str
    consumer: Consumer
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    # a label for listings, chosen by the operator
    name: str | None = None
    # from then on the key is refused as a revoked one is (None: never)
    expires_at: datetime | None = None


@dataclass(frozen=True)
class EraseResult:
    erased: int


# every type of memory event, as webhooks name them
EVENT_TYPES = tuple(t.value for t in EventType)


@dataclass(frozen=True)
class MemoryEvent:
    """One change to memories, as the realtime stream delivers it.

    `memory` is the memory as a list would show it when the event is relayed or replayed (its
    newest state), or None once erased. `changed_at` is when the write that made the change
    began in the database (its transaction's start, shared by all of one write's events); the
    cursor, not this time, gives the order. (A memory's own `occurred_at` is another fact:
    when what the memory describes happened.)
    """

    cursor: int
    project_id: uuid.UUID
    scope: Scope
    owner_id: str
    type: EventType
    memory_id: uuid.UUID | None
    actor_id: str
    changed_at: datetime
    memory: Memory | None = None


@dataclass(frozen=True)
class Weights:
    """How recall fuses its signals into one score; the four weights sum to 1, so the score
    stays in [0, 1]. Recency halves every `recency_half_life_days` since the last update."""

    vector: float
    lexical: float
    recency: float
    pinned: float
    recency_half_life_days: float

    def __post_init__(self) -> None:
        parts = (self.vector, self.lexical, self.recency, self.pinned)
        if any(not 0.0 <= w <= 1.0 for w in parts) or abs(sum(parts) - 1.0) > 1e-6:
            raise ValueError("recall weights must each be in [0, 1] and sum to 1")
        if self.recency_half_life_days <= 0:
            raise ValueError("the recency half-life must be positive")


@dataclass(frozen=True)
class Webhook:
    """An HTTP endpoint of a project that receives the project's memory events in cursor order.

    `acked_cursor` is the last event its receiver acknowledged (or the end of the log when it was
    registered); delivery resumes after it. `pending` is filled in only where it was counted.
    """

    id: uuid.UUID
    project_id: uuid.UUID
    project_name: str
    url: str
    # None: every event type
    event_types: tuple[str, ...] | None
    created_by: str
    created_at: datetime
    acked_cursor: int
    last_delivered_at: datetime | None
    # failed attempts since the last acknowledged delivery
    failures: int
    last_error: str | None
    last_error_at: datetime | None
    next_attempt_at: datetime | None
    pending: int | None = None


# --- a memory's fields, the one list every store and format of a memory is derived from --------


def unwrap_optional(hint: Any) -> tuple[Any, bool]:
    """The type a field annotated `hint` holds, and whether it may be None."""
    args = typing.get_args(hint)
    if type(None) in args:
        [held] = [a for a in args if a is not type(None)]
        return held, True
    return hint, False


def shown_as(held: Any) -> Any:
    """The type a transport shows a value of type `held` as: an enum of text
    (`InvalidationReason`) as its text, any other type as itself."""
    return str if isinstance(held, type) and issubclass(held, enum.StrEnum) else held


# name -> (type, may be None), in the dataclass's order
MEMORY_FIELDS: dict[str, tuple[Any, bool]] = {
    name: unwrap_optional(hint) for name, hint in typing.get_type_hints(Memory).items()
}
