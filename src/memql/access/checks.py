"""What a principal may do, checked by the service before it reads or writes. Each check is a
pure function of the `Principal` (its grant, consumer and kind of credential) and raises
`Forbidden`, saying why, when the answer is no."""

from __future__ import annotations

from memql.errors import Forbidden
from memql.model import Consumer, Principal, Scope


def require_write(principal: Principal, scope: Scope) -> None:
    """The grant writes `scope`."""
    if not principal.grant.for_scope(scope).can_write:
        raise Forbidden(f"this credential may not write {scope.value}-scope memories")


def require_some_write(principal: Principal) -> None:
    """The grant writes some scope. Checked before a memory is looked up to be changed, so a
    credential that may write nothing is refused as such (FORBIDDEN), whether the memory exists
    or not, never NOT_FOUND."""
    if not any(principal.grant.for_scope(s).can_write for s in Scope):
        raise Forbidden("this credential may not write memories")


def readable(principal: Principal, scope: Scope | None) -> tuple[Scope, ...]:
    """The scopes a read covers: `scope`, which the grant must read, or without one every scope
    the grant reads (at least one)."""
    if scope is not None:
        if not principal.grant.for_scope(scope).can_read:
            raise Forbidden(f"this credential may not read {scope.value}-scope memories")
        return (scope,)
    scopes = principal.grant.readable_scopes()
    if not scopes:
        raise Forbidden("this credential may not read memories")
    return scopes


def require_erasure(principal: Principal) -> None:
    """Erasure is irreversible: only a backend or agent acting with an `agent` API key may
    erase; a `client` key (dashboards, browsers) never does, like a browser token. (The grant
    is checked apart: erasing a user's memories also needs `require_write`.)"""
    if not principal.server_credential or principal.consumer is not Consumer.AGENT:
        raise Forbidden("erasure needs a server credential (an API key of the agent consumer)")


def require_webhook_admin(principal: Principal) -> None:
    """Endpoints are managed with an API key whose grant reads both scopes: an endpoint
    receives the project's shared memories and every user's own, which such a key can already
    read by naming each user. The consumer is not checked: the access policy has already turned
    it into the grant."""
    if not principal.server_credential:
        raise Forbidden("webhooks are managed with a server credential (API key)")
    if len(principal.grant.readable_scopes()) < len(Scope):
        raise Forbidden(
            "a webhook receives project-scope and user-scope events: this credential's grant"
            " does not read both"
        )
