"""The errors the client raises: one class per `extensions.code`, each carrying the code."""

from __future__ import annotations

from typing import Any


class MemqlClientError(Exception):
    """The server refused or failed a request. `code` is its `extensions.code`, `status` the
    HTTP status when the whole request was refused, `extensions` everything else it said."""

    code: str = "INTERNAL_SERVER_ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        extensions: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status
        self.extensions = extensions or {}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class BadUserInput(MemqlClientError):
    code = "BAD_USER_INPUT"


class Unauthenticated(MemqlClientError):
    code = "UNAUTHENTICATED"


class Forbidden(MemqlClientError):
    code = "FORBIDDEN"


class NotFound(MemqlClientError):
    code = "NOT_FOUND"


class Conflict(MemqlClientError):
    code = "CONFLICT"


class ServiceUnavailable(MemqlClientError):
    """The server cannot answer now (its database is away); retrying later may succeed."""

    code = "SERVICE_UNAVAILABLE"


class SubscriberBehind(MemqlClientError):
    """A stream fell too far behind; `since` is the cursor to resume from."""

    code = "SUBSCRIBER_BEHIND"

    @property
    def since(self) -> str | None:
        value = self.extensions.get("since")
        return str(value) if value is not None else None


class InternalServerError(MemqlClientError):
    """The server failed; `error_id` is the id it logged the failure under."""

    code = "INTERNAL_SERVER_ERROR"

    @property
    def error_id(self) -> str | None:
        value = self.extensions.get("errorId")
        return str(value) if value is not None else None


_BY_CODE: dict[str, type[MemqlClientError]] = {
    cls.code: cls
    for cls in (
        BadUserInput,
        Unauthenticated,
        Forbidden,
        NotFound,
        Conflict,
        ServiceUnavailable,
        SubscriberBehind,
        InternalServerError,
    )
}

# what a refused request means when its body says nothing the client can read
_BY_STATUS = {
    400: BadUserInput,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: BadUserInput,
    503: ServiceUnavailable,
}


def from_graphql_error(error: dict[str, Any], status: int | None = None) -> MemqlClientError:
    """The exception for one entry of a GraphQL `errors` list."""
    extensions = dict(error.get("extensions") or {})
    code = str(extensions.pop("code", "INTERNAL_SERVER_ERROR"))
    cls = _BY_CODE.get(code, MemqlClientError)
    return cls(str(error.get("message", code)), code=code, status=status, extensions=extensions)


def from_status(status: int, text: str) -> MemqlClientError:
    """The exception for a refused request whose body holds no GraphQL errors."""
    cls = _BY_STATUS.get(status, InternalServerError if status >= 500 else MemqlClientError)
    return cls(text.strip() or f"HTTP {status}", status=status)
