"""Access policies that the tests configure through MEMQL_ACCESS_POLICY (module:function)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from memql.access.policy import NO_MEMORY, AccessRequest, PolicyResult
from memql.model import Access, Grant, parse_grant

# users whose grant a test has withdrawn; the policy answers NO_MEMORY for them from then on
WITHDRAWN: set[str] = set()
# run once, after the credentials of this user were resolved and before its grant is decided:
# lets a test cut the database between authentication and the work
AFTER_AUTHENTICATION: dict[str, Callable[[], Awaitable[None]]] = {}


async def by_user(request: AccessRequest) -> PolicyResult | str | None:
    """An async policy whose answer depends on the user id, to reach every outcome."""
    await asyncio.sleep(0)
    if hook := AFTER_AUTHENTICATION.pop(request.user_id, None):
        await hook()
    if request.user_id in WITHDRAWN:
        return NO_MEMORY
    if request.user_id.startswith("grant:"):
        # "grant:user=read,project=none": the grant a test wants for this caller
        return parse_grant(request.user_id.removeprefix("grant:"))
    match request.user_id:
        case "reader":
            return Grant(user=Access.READ, project=Access.READ)
        case "no-project":
            return {"user": "read-write", "project": "none"}
        case "no-memory":
            return NO_MEMORY
        case "forgot-return":
            return None
        case "typo":
            return {"user": "read-write", "project": "admin"}
        case "raises":
            raise RuntimeError("the policy's backing service is down")
        case "browser-reader" if request.consumer == "client":
            return {"user": "read", "project": "none"}
        case _:
            return Grant(user=Access.READ_WRITE, project=Access.READ_WRITE)
