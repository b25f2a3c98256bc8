"""`memql.access.credentials`: a key's name and expiry as the command line takes them. Every
transport's refusal of an expired key is tested against the real server in
tests/api/test_key_expiry.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memql.access import credentials
from memql.errors import BadInput

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("15m", 900),
        ("12h", 43_200),
        ("30d", 2_592_000),
        ("2w", 1_209_600),
        ("1d12h", 129_600),
        ("1h30m15s", 5_415),
        ("007s", 7),
        ("36525d", 36_525 * 86_400),
    ],
)
def test_an_expires_in_is_whole_numbers_of_units(text, seconds):
    assert credentials.expires_in(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("30", "is not a duration"),
        ("d", "is not a duration"),
        ("", "is not a duration"),
        ("30x", "is not a duration"),
        ("30D", "is not a duration"),
        ("1.5h", "is not a duration"),
        ("30 d", "is not a duration"),
        ("-5s", "is not a duration"),
        ("+5s", "is not a duration"),
        ("5s ", "is not a duration"),
        ("P30D", "is not a duration"),
        ("٣s", "is not a duration"),  # an Arabic-Indic three: int() would take it
        ("0s", "is no time at all"),
        ("0d0h", "is no time at all"),
        ("36526d", "is more than 100 years"),
        ("9" * 5000 + "s", "is more than 100 years"),
    ],
)
def test_a_bad_expires_in_is_refused_in_one_line_naming_the_value(text, says):
    with pytest.raises(BadInput) as refused:
        credentials.expires_in(text)
    message = refused.value.message
    assert message.startswith(f"--expires-in {text!r} {says}"), message
    assert "\n" not in message


def test_an_expires_at_is_an_instant_with_its_offset():
    assert credentials.expires_at("2026-12-31T23:00:00Z", NOW) == datetime(
        2026, 12, 31, 23, tzinfo=UTC
    )
    plus_one = credentials.expires_at("2026-12-31T23:00+01:00", NOW)
    assert plus_one == datetime(2026, 12, 31, 22, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tomorrow", "is not an ISO-8601 instant"),
        ("2026-13-01T00:00Z", "is not an ISO-8601 instant"),
        ("2026-12-31T23:00:00", "has no UTC offset"),
        ("2026-12-31", "has no UTC offset"),
        ("2026-06-01T12:00:00Z", "is in the past"),  # now is not later than now
        ("2020-01-01T00:00:00Z", "is in the past"),
        ("2200-01-01T00:00:00Z", "is more than 100 years away"),
    ],
)
def test_a_bad_expires_at_is_refused_in_one_line_naming_the_value(text, says):
    with pytest.raises(BadInput) as refused:
        credentials.expires_at(text, NOW)
    assert refused.value.message.startswith(f"--expires-at {text!r} {says}"), refused.value


def test_a_key_name_is_a_label_of_1_to_100_printable_characters():
    assert credentials.key_name("  ci deploy ") == "ci deploy"
    assert credentials.key_name("ключ для CI") == "ключ для CI"
    assert credentials.key_name("x" * 100) == "x" * 100
    for bad in ("", "   ", "x" * 101, "line\nbreak", "tab\there", "zero\u200bwidth", "bidi\u202e"):
        with pytest.raises(BadInput):
            credentials.key_name(bad)


# --- a stream's watch of its key's expiry -----------------------------------------------------
