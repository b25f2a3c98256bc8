"""The grant checks (`memql.access.checks`), each stated as a table over grants, consumers and
kinds of credential: what passes, and the refusal (FORBIDDEN, with its reason) otherwise."""

from __future__ import annotations

import uuid
from itertools import product

import pytest

from memql.access import checks
from memql.errors import Forbidden
from memql.model import Access, Consumer, Grant, Principal, Scope

NONE, READ, READ_WRITE = Access.NONE, Access.READ, Access.READ_WRITE
USER, PROJECT = Scope.USER, Scope.PROJECT


def principal(
    user: Access,
    project: Access,
    *,
    consumer: Consumer = Consumer.AGENT,
    server_credential: bool = True,
) -> Principal:
    return Principal(
        project_id=uuid.uuid4(),
        project_name="acme",
        user_id="alice",
        consumer=consumer,
        grant=Grant(user=user, project=project),
        server_credential=server_credential,
    )


def refusal(check, *args) -> str | None:
    """The reason `check` refuses, or None when it passes."""
    try:
        check(*args)
    except Forbidden as exc:
        assert exc.code == "FORBIDDEN"
        return exc.message
    return None


GRANTS = list(product(Access, Access))


@pytest.mark.parametrize(
    ("user", "project", "scope", "refused"),
    [
        (user, project, scope, {USER: user, PROJECT: project}[scope] is not READ_WRITE)
        for (user, project), scope in product(GRANTS, Scope)
    ],
)
def test_require_write_passes_only_a_scope_the_grant_reads_and_writes(
    user, project, scope, refused
):
    reason = refusal(checks.require_write, principal(user, project), scope)
    assert reason == (
        f"this credential may not write {scope.value}-scope memories" if refused else None
    )


@pytest.mark.parametrize(
    ("user", "project", "refused"),
    [(u, p, READ_WRITE not in (u, p)) for u, p in GRANTS],
)
def test_require_some_write_passes_a_grant_that_writes_either_scope(user, project, refused):
    reason = refusal(checks.require_some_write, principal(user, project))
    assert reason == ("this credential may not write memories" if refused else None)


@pytest.mark.parametrize(
    ("user", "project", "scope", "answer"),
    [
        # no scope named: every scope the grant reads, or a refusal when it reads none
        (NONE, NONE, None, "this credential may not read memories"),
        (READ, NONE, None, (USER,)),
        (NONE, READ_WRITE, None, (PROJECT,)),
        (READ, READ, None, (USER, PROJECT)),
        (READ_WRITE, READ, None, (USER, PROJECT)),
        # a scope named: that scope alone, which the grant must read (writing is not needed)
        (READ, NONE, USER, (USER,)),
        (READ_WRITE, NONE, USER, (USER,)),
        (READ, NONE, PROJECT, "this credential may not read project-scope memories"),
        (NONE, READ, USER, "this credential may not read user-scope memories"),
        (NONE, READ, PROJECT, (PROJECT,)),
        (READ, READ, PROJECT, (PROJECT,)),
        (NONE, NONE, USER, "this credential may not read user-scope memories"),
    ],
)
def test_readable_is_the_scope_asked_for_or_every_readable_one(user, project, scope, answer):
    who = principal(user, project)
    if isinstance(answer, str):
        assert refusal(checks.readable, who, scope) == answer
    else:
        assert checks.readable(who, scope) == answer


ERASURE = "erasure needs a server credential (an API key of the agent consumer)"


@pytest.mark.parametrize(
    ("consumer", "server_credential", "refused"),
    [
        (Consumer.AGENT, True, False),
        # a `client` key serves dashboards and browsers
        (Consumer.CLIENT, True, True),
        # a browser token, whatever consumer its policy maps it to
        (Consumer.AGENT, False, True),
        (Consumer.CLIENT, False, True),
    ],
)
@pytest.mark.parametrize(("user", "project"), GRANTS)
def test_require_erasure_passes_an_agent_api_key_alone_whatever_its_grant(
    consumer, server_credential, refused, user, project
):
    who = principal(user, project, consumer=consumer, server_credential=server_credential)
    assert refusal(checks.require_erasure, who) == (ERASURE if refused else None)


NOT_AN_API_KEY = "webhooks are managed with a server credential (API key)"
NOT_BOTH = (
    "a webhook receives project-scope and user-scope events: this credential's grant does not"
    " read both"
)


@pytest.mark.parametrize(
    ("user", "project", "server_credential", "reason"),
    [
        (READ, READ, True, None),
        (READ_WRITE, READ_WRITE, True, None),
        (READ, READ_WRITE, True, None),
        (READ_WRITE, NONE, True, NOT_BOTH),
        (NONE, READ_WRITE, True, NOT_BOTH),
        (NONE, NONE, True, NOT_BOTH),
        # a browser token never manages endpoints, whatever it reads
        (READ_WRITE, READ_WRITE, False, NOT_AN_API_KEY),
        (NONE, NONE, False, NOT_AN_API_KEY),
    ],
)
@pytest.mark.parametrize("consumer", Consumer)
def test_require_webhook_admin_passes_an_api_key_that_reads_both_scopes(
    user, project, server_credential, reason, consumer
):
    who = principal(user, project, consumer=consumer, server_credential=server_credential)
    assert refusal(checks.require_webhook_admin, who) == reason
