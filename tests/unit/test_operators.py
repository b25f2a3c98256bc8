"""Operators of the admin API: `MEMQL_ADMIN_TOKENS` holds names and SHA-256 digests only, read
without ever echoing an entry; a request's `Authorization` is the operator whose token it
carries, and anything else (none, two, another scheme, a project key, a browser token, an
unknown token) is UNAUTHENTICATED saying what was wrong."""

from __future__ import annotations

import pytest

from memql.access import operators
from memql.access.credentials import generate_key
from memql.errors import ConfigurationError, Unauthenticated
from memql.settings import OperatorToken, Settings, operator_tokens

ALICE = operators.new_token()
BOB = operators.new_token()


def entries(*pairs: tuple[str, str]) -> str:
    return ",".join(operators.setting_entry(name, token) for name, token in pairs)


def test_the_entry_admin_token_prints_is_what_the_setting_reads():
    settings = Settings.from_env({"MEMQL_ADMIN_TOKENS": entries(("alice", ALICE), ("ci.bot", BOB))})
    assert [t.name for t in settings.admin_tokens] == ["alice", "ci.bot"]
    assert settings.admin_tokens[0].digest == operators.digest(ALICE)
    # neither the token nor its digest shows in the settings' repr
    assert ALICE not in repr(settings) and operators.digest(ALICE).hex() not in repr(settings)


def test_no_setting_means_no_operator():
    assert Settings.from_env({}).admin_tokens == ()


def test_upper_case_hex_and_blanks_around_entries_are_read():
    digest = operators.digest(ALICE).hex().upper()
    tokens = operator_tokens("V", f" alice:sha256:{digest} , ")
    assert tokens == (OperatorToken("alice", operators.digest(ALICE)),)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        # a token pasted in place of its digest: refused without echoing it
        (f"alice:{ALICE}", "V: entry 1 is not NAME:sha256:HEX"),
        (ALICE, "V: entry 1 is not NAME:sha256:HEX"),
        (f"alice:sha256:{'0' * 63}", "V: entry 1 is not NAME:sha256:HEX"),
        (f"al ice:sha256:{'0' * 64}", "V: entry 1 is not NAME:sha256:HEX"),
        (f"-alice:sha256:{'0' * 64}", "V: entry 1 is not NAME:sha256:HEX"),
        (f"a:sha256:{'0' * 64},a:sha256:{'1' * 64}", "V: entry 2 repeats an operator's name"),
        (f"a:sha256:{'0' * 64},b:sha256:{'0' * 64}", "V: entry 2 repeats another entry's token"),
        (",", "V names no operator"),
    ],
)
def test_a_bad_entry_is_refused_naming_its_position_never_its_text(raw, says):
    with pytest.raises(ConfigurationError) as refused:
        operator_tokens("V", raw)
    assert str(refused.value).startswith(says)
    assert ALICE not in str(refused.value)


OPERATORS = operators.Operators(operator_tokens("V", entries(("alice", ALICE), ("bob", BOB))))


def test_each_token_is_its_operator():
    assert OPERATORS.identify([f"Bearer {ALICE}"]) == operators.Operator("alice")
    assert OPERATORS.identify([f"bearer  {BOB} "]) == operators.Operator("bob")


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ([], operators.NEEDED),
        ([f"Bearer {ALICE}", f"Bearer {ALICE}"], "send one Authorization header"),
        (["Bearer"], operators.NEEDED),
        ([f"Basic {ALICE}"], operators.NEEDED),
        ([f"Bearer {generate_key()}"], operators.NOT_A_PROJECT_KEY),
        (["Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"], operators.NOT_A_BROWSER_TOKEN),
        ([f"Bearer {operators.new_token()}"], operators.UNKNOWN),
        ([f"Bearer {ALICE[:-1]}"], operators.UNKNOWN),
        ([f"Bearer {ALICE}x"], operators.UNKNOWN),
    ],
    ids=["none", "two", "empty", "basic", "project key", "jwt", "unknown", "shorter", "longer"],
)
def test_anything_but_one_known_token_is_unauthenticated(headers, says):
    with pytest.raises(Unauthenticated) as refused:
        OPERATORS.identify(headers)
    assert refused.value.message == says
    assert ALICE not in refused.value.message


def test_without_operators_no_token_is_known():
    assert not operators.Operators(())
    with pytest.raises(Unauthenticated):
        operators.Operators(()).identify([f"Bearer {ALICE}"])
