"""What both clients share: credentials, the request body, and reading the answer."""

from __future__ import annotations

from typing import Any, TypeVar

import httpx

from memql.client.errors import MemqlClientError, from_graphql_error, from_status
from memql.client.operations import Operation

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0


def credentials(api_key: str | None, user_id: str | None, token: str | None) -> dict[str, str]:
    """The headers of a server credential (API key + user) or a browser one (a JWT)."""
    if token is not None:
        if api_key is not None or user_id is not None:
            raise ValueError("pass either a token, or an api_key with a user_id")
        return {"Authorization": f"Bearer {token}"}
    if api_key is None or user_id is None:
        raise ValueError("an api_key needs the user_id it acts for (or pass a token)")
    return {"Authorization": f"Bearer {api_key}", "X-User-Id": user_id}


def request_headers(credentials: dict[str, str]) -> dict[bytes, bytes]:
    """Credentials as HTTP headers, in UTF-8 as the server reads them (a user id need not be
    ASCII)."""
    return {name.encode(): value.encode() for name, value in credentials.items()}


def graphql_url(url: str) -> str:
    """`http://host:port` or the full `/graphql` address, as the user gives it."""
    url = url.rstrip("/")
    return url if url.endswith("/graphql") else f"{url}/graphql"


def websocket_url(url: str) -> str:
    return "ws" + graphql_url(url).removeprefix("http")


def body(operation: Operation[Any]) -> dict[str, Any]:
    return {"query": operation.document, "variables": operation.variables}


def result(operation: Operation[T], response: httpx.Response) -> T:
    """The operation's typed result, or the exception for the first error."""
    try:
        answer = response.json()
    except ValueError:
        raise from_status(response.status_code, response.text) from None
    errors = answer.get("errors") if isinstance(answer, dict) else None
    if errors:
        status = response.status_code if response.status_code != 200 else None
        raise from_graphql_error(errors[0], status)
    if response.status_code != 200 or not isinstance(answer.get("data"), dict):
        raise from_status(response.status_code, response.text)
    try:
        return operation.parse(answer["data"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MemqlClientError(f"unexpected answer: {exc!r}") from exc
