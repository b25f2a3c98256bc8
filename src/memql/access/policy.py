"""The access policy: one per deployment, deciding what each request may do with memory.

Without code: a grant per consumer (`MEMQL_CLIENT_GRANT`, `MEMQL_AGENT_GRANT`). With code:
`MEMQL_ACCESS_POLICY=module:function`, a sync or async callable that takes an `AccessRequest` and
returns a `Grant`, a mapping such as ``{"user": "read-write", "project": "read"}``, or
`NO_MEMORY`. Anything else (a forgotten return, a typo, an exception) is a broken policy: a loud
server error, never a silent denial.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from memql.errors import ConfigurationError, MemqlError, mask
from memql.model import Access, Consumer, Grant, parse_access

log = logging.getLogger("memql.access")


class NoMemory:
    """The explicit "this request has no memory" answer of a policy."""

    _instance: NoMemory | None = None

    def __new__(cls) -> NoMemory:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_MEMORY"


NO_MEMORY: Final = NoMemory()
NO_GRANT = Grant(user=Access.NONE, project=Access.NONE)


@dataclass(frozen=True)
class AccessRequest:
    """What a policy decides on: who asks, through what, in which project."""

    user_id: str
    consumer: str  # "agent" or "client"
    project: str  # the project's name
    project_id: str


PolicyResult = Grant | Mapping[str, str] | NoMemory
Policy = Callable[[AccessRequest], PolicyResult | Awaitable[PolicyResult]]


class BrokenPolicy(MemqlError):
    code = "INTERNAL_SERVER_ERROR"


def coerce_grant(value: object) -> Grant:
    """A policy's answer as a Grant; ValueError when it is not a valid answer."""
    if isinstance(value, NoMemory):
        return NO_GRANT
    if isinstance(value, Grant):
        return value
    if isinstance(value, Mapping):
        if set(value) != {"user", "project"}:
            raise ValueError(f"a grant maps exactly 'user' and 'project', got {dict(value)!r}")
        user, project = value["user"], value["project"]
        if not isinstance(user, str | Access) or not isinstance(project, str | Access):
            raise ValueError(f"grant values must be strings, got {dict(value)!r}")
        return Grant(
            user=user if isinstance(user, Access) else parse_access(user),
            project=project if isinstance(project, Access) else parse_access(project),
        )
    if value is None:
        raise ValueError("the policy returned None (a forgotten return?)")
    raise ValueError(f"the policy returned {value!r}, not a grant or NO_MEMORY")


def per_consumer(grants: Mapping[Consumer, Grant]) -> Policy:
    """The built-in policy: one grant per consumer."""

    def policy(request: AccessRequest) -> Grant:
        return grants[Consumer(request.consumer)]

    return policy


def load_policy(spec: str) -> Policy:
    """Import `module:function`; a ConfigurationError says what is wrong."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"MEMQL_ACCESS_POLICY={spec!r} is not of the form module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"MEMQL_ACCESS_POLICY: cannot import {module_name!r}: {exc}"
        ) from exc
    policy = getattr(module, attribute, None)
    if not callable(policy):
        raise ConfigurationError(f"MEMQL_ACCESS_POLICY: {spec!r} is not a callable")
    # only its being callable can be checked here; `decide` refuses whatever else it does
    return cast(Policy, policy)


async def decide(policy: Policy, request: AccessRequest) -> Grant:
    """Run the policy once; a broken one raises BrokenPolicy after logging why."""
    try:
        answer: Any = policy(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return coerce_grant(answer)
    except Exception as exc:
        raise mask(
            exc,
            f"access policy is broken for user {request.user_id!r}, consumer"
            f" {request.consumer}, project {request.project}: {exc}",
            log=log,
            message="the access policy failed (error id {error_id}); no memory is served",
            error=BrokenPolicy,
            # a wrong answer is told by its message; a failure needs its traceback
            traceback=not isinstance(exc, ValueError),
        ) from None
