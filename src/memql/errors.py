"""The small exception tree of memql. Each class maps to one GraphQL ``extensions.code``."""

from __future__ import annotations

from typing import Any


class MemqlError(Exception):
    """An expected failure, shown to the caller with its code and message."""

    code = "INTERNAL_SERVER_ERROR"
    #: set where the whole HTTP request is refused with this status, revealing nothing more
    http_status: int | None = None

    def __init__(self, message: str, **extensions: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extensions = extensions


class BadInput(MemqlError):
    code = "BAD_USER_INPUT"


class Unauthenticated(MemqlError):
    code = "UNAUTHENTICATED"


class Forbidden(MemqlError):
    code = "FORBIDDEN"


class NotFound(MemqlError):
    code = "NOT_FOUND"


class Conflict(MemqlError):
    code = "CONFLICT"


class NotEntitled(MemqlError):
    """The project has no memory (unknown, or its entitlement is inactive). Shown as HTTP 404,
    revealing nothing about memory."""

    code = "NOT_FOUND"
    http_status = 404


class ServiceUnavailable(MemqlError):
    """The database cannot be reached (or gave no connection within the pool's wait): the
    request is answered at once with HTTP 503, to be retried later."""

    code = "SERVICE_UNAVAILABLE"
    http_status = 503


class CredentialsUnavailable(ServiceUnavailable):
    """Credentials could not be resolved (the database is unreachable): fail closed."""


class ConfigurationError(Exception):
    """The service cannot start as configured; the message says what to do."""


class SubscriberBehind(MemqlError):
    """A subscriber fell too far behind the live stream: it is closed, and resumes with `since`
    set to the last cursor it received."""

    code = "SUBSCRIBER_BEHIND"
