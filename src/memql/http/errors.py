"""Every refusal over HTTP is JSON in the GraphQL error shape, so a client library that only
reads `errors[].extensions.code` understands a 404 or a 503 as well as a field error."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memql.errors import MemqlError, NotEntitled, RateLimited, ServiceUnavailable, mask

log = logging.getLogger("memql.errors")

# the code of an answer refused as a whole, by HTTP status
CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "TOO_MANY_REQUESTS",
    500: "INTERNAL_SERVER_ERROR",
    503: "SERVICE_UNAVAILABLE",
}


def status_for(error: MemqlError) -> int | None:
    """The status of an HTTP request refused as a whole for `error`, where one is: a project
    without memory is a 404 that reveals nothing more; a database that is away, a 503 to be
    retried."""
    if isinstance(error, NotEntitled):
        return 404
    if isinstance(error, ServiceUnavailable):
        return 503
    if isinstance(error, RateLimited):
        return 429
    return None


def retry_after(error: MemqlError) -> dict[str, str]:
    """The `Retry-After` header a refusal for `error` carries, if any."""
    return {"Retry-After": str(error.retry_after)} if isinstance(error, RateLimited) else {}


def code_for(status: int) -> str:
    return CODES.get(status, "BAD_REQUEST" if status < 500 else "INTERNAL_SERVER_ERROR")


def error_body(message: str, code: str, **extensions: Any) -> dict[str, Any]:
    return {"errors": [{"message": message, "extensions": {"code": code, **extensions}}]}


def error_response(
    status: int,
    message: str | None = None,
    *,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    """A refusal with `status`: `{"errors": [{"message", "extensions": {"code", ...}}]}`. A
    message that echoes input holding a lone surrogate is escaped, not a failure to encode."""
    text = (message or HTTPStatus(status).phrase).encode("utf-8", "backslashreplace").decode()
    return JSONResponse(
        error_body(text, code or code_for(status), **extensions),
        status_code=status,
        headers=dict(headers) if headers else None,
    )


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's handler for routing refusals (an unknown path, a method not served)."""
    assert isinstance(exc, HTTPException)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return error_response(exc.status_code, exc.detail, headers=exc.headers)


async def unexpected(request: Request, exc: Exception) -> Response:
    """Anything unhandled: masked, and logged with an id the caller can quote."""
    masked = mask(exc, f"unexpected error on {request.url.path}", log=log)
    return error_response(500, masked.message, **masked.extensions)
