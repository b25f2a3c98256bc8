"""The per-request context every resolver works from."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from strawberry.types import Info as StrawberryInfo

from memql.access.authenticate import Authenticator
from memql.errors import MemqlError
from memql.model import Principal
from memql.service import MemoryService


@dataclass
class Context:
    service: MemoryService
    # exactly one of these is set: who is asking, or why they could not be identified
    _principal: Principal | None
    _auth_error: MemqlError | None = None
    # websockets: the `connection_init` payload, set by Strawberry before `on_ws_connect`
    connection_params: dict[str, Any] | None = None
    # to check credentials again later (a long-lived subscription must notice a revoked key)
    authenticator: Authenticator | None = None
    # a websocket connection: its credentials are checked again for every operation
    websocket: bool = False
    # HTTP: the request's credential headers (a subscription streamed over HTTP checks them
    # again while it lives)
    request_headers: list[tuple[str, str]] | None = None
    # websockets: why `connection_init` could not be authorised now (the database is away),
    # which says nothing about the credentials: the socket closes with "try again later"
    unavailable: str | None = None

    def identify(self, principal: Principal) -> None:
        self._principal, self._auth_error = principal, None

    async def for_operation(self, credentials: list[tuple[str, str]]) -> Context:
        """A context for one operation of this connection, identified by what `credentials`
        (the `connection_init` headers) are worth now: a revoked key, a disabled project or a
        withdrawn grant stops the operation, whatever the connection was granted."""
        assert self.authenticator is not None
        try:
            principal = await self.authenticator.authenticate(credentials)
        except MemqlError as exc:
            return replace(self, _principal=None, _auth_error=exc)
        return replace(self, _principal=principal, _auth_error=None)

    @property
    def authenticated(self) -> bool:
        """Whether the request carries credentials that were accepted."""
        return self._principal is not None

    @property
    def principal(self) -> Principal:
        if self._principal is None:
            assert self._auth_error is not None
            raise self._auth_error
        return self._principal


Info = StrawberryInfo[Context, None]
