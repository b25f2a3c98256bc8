"""The small exception tree of memql. Each class maps to one GraphQL ``extensions.code``; each
transport decides how it answers one (HTTP statuses: `http.errors.status_for`)."""

from __future__ import annotations

import logging
import math
import re
import uuid
from collections.abc import Callable
from typing import Any

_log = logging.getLogger("memql.errors")


class MemqlError(Exception):
    """An expected failure, shown to the caller with its code and message."""

    code = "INTERNAL_SERVER_ERROR"

    def __init__(self, message: str, **extensions: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extensions = extensions


# a domain name of a field or argument as messages quote it: `source_thread_ids`, `text`
_QUOTED_NAME = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)*)`")


def renamed_for(error: MemqlError, rename: Callable[[str], str]) -> tuple[str, dict[str, Any]]:
    """`error`'s message and extensions with the domain's names of fields and arguments (in
    backquotes, and as `field` and `argument`) as a transport spells them for its callers."""
    message = _QUOTED_NAME.sub(lambda m: f"`{rename(m.group(1))}`", error.message)
    extensions = {
        k: rename(v) if k in ("field", "argument") and isinstance(v, str) else v
        for k, v in error.extensions.items()
    }
    return message, extensions


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
    """The project has no memory (unknown, or its entitlement is inactive): nothing about
    memory is revealed."""

    code = "NOT_FOUND"


class ServiceUnavailable(MemqlError):
    """The database cannot be reached (or gave no connection within the pool's wait): the
    request is answered at once, to be retried later."""

    code = "SERVICE_UNAVAILABLE"


class DeadlineExceeded(MemqlError):
    """The request used up its time with the database (MEMQL_REQUEST_TIMEOUT_SECONDS): what
    had not run by then is refused, and no statement of it runs on past the deadline. The same
    request will fail again: ask for less in one request."""

    code = "REQUEST_TIMEOUT"


class RateLimited(MemqlError):
    """The credential or its project sent more requests than its rate allows; `retry_after`
    seconds from now the next one is accepted."""

    code = "TOO_MANY_REQUESTS"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, retryAfter=max(1, math.ceil(retry_after)))
        self.retry_after = max(1, math.ceil(retry_after))


class CredentialsUnavailable(ServiceUnavailable):
    """Credentials could not be resolved (the database is unreachable): fail closed."""


class ConfigurationError(Exception):
    """The service cannot start as configured; the message says what to do."""


class SubscriberBehind(MemqlError):
    """A subscriber fell too far behind the live stream: it is closed, and resumes with `since`
    set to the last cursor it received."""

    code = "SUBSCRIBER_BEHIND"


class Unexpected(MemqlError):
    """A failure the caller was not meant to see, masked (see `mask`)."""

    code = "INTERNAL_SERVER_ERROR"


def mask(
    cause: BaseException | None,
    what: str,
    *,
    log: logging.Logger = _log,
    message: str = "Internal server error (error id {error_id})",
    error: type[MemqlError] = Unexpected,
    traceback: bool = True,
) -> MemqlError:
    """What the caller is told of an unexpected failure: `message` with a fresh error id and
    nothing of the cause. The cause is logged under the same id (`what`, then the id), with its
    traceback unless `traceback` is off, so the id a caller quotes finds it."""
    error_id = uuid.uuid4().hex[:12]
    log.error("%s (error id %s)", what, error_id, exc_info=cause if traceback else None)
    return error(message.format(error_id=error_id), errorId=error_id)
