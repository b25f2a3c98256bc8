"""A typed Python client for memql's GraphQL API: `Client` (sync) and `AsyncClient`."""

from memql.client.aio import AsyncClient
from memql.client.errors import (
    BadUserInput,
    Conflict,
    Forbidden,
    InternalServerError,
    MemqlClientError,
    NotFound,
    ServiceUnavailable,
    SubscriberBehind,
    Unauthenticated,
)
from memql.client.operations import MemoryInput
from memql.client.sync import Client
from memql.client.types import (
    Grant,
    Memory,
    MemoryContext,
    MemoryEvent,
    NearDuplicate,
    Page,
    RecallHit,
    SaveResult,
    SupersedeResult,
    Viewer,
    Webhook,
)
from memql.model import Signals

__all__ = [
    "AsyncClient",
    "BadUserInput",
    "Client",
    "Conflict",
    "Forbidden",
    "Grant",
    "InternalServerError",
    "Memory",
    "MemoryContext",
    "MemoryEvent",
    "MemoryInput",
    "MemqlClientError",
    "NearDuplicate",
    "NotFound",
    "Page",
    "RecallHit",
    "SaveResult",
    "ServiceUnavailable",
    "Signals",
    "SubscriberBehind",
    "SupersedeResult",
    "Unauthenticated",
    "Viewer",
    "Webhook",
]
