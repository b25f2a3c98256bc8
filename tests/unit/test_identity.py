"""`memql.access.identity`: one user, one spelling, whichever credential names them; what could
make two spellings look alike is refused, never repaired; each credential header comes once."""

from __future__ import annotations

import pytest

from memql.access import identity
from memql.errors import Unauthenticated


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("alice", "alice"),
        ("Alice", "Alice"),  # case is the identity provider's, not ours to fold
        ("a\u030a", "\u00e5"),  # `a` + combining ring is the precomposed `å`
        ("\u00e5", "\u00e5"),
        ("jay smith", "jay smith"),  # inner spaces are part of the id
        ("user@example.com", "user@example.com"),
        ("\U0001f600", "\U0001f600"),
        ("x" * 256, "x" * 256),
    ],
)
def test_a_user_id_is_kept_in_nfc(raw: str, canonical: str):
    assert identity.canonical_user_id(raw) == canonical


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("", "1..256 characters"),
        ("x" * 257, "1..256 characters"),
        (" jay", "must not begin or end with whitespace"),
        ("jay\u00a0", "must not begin or end with whitespace"),
        ("ja\ny", "control or format characters or line breaks"),
        ("ja\ty", "control or format characters"),
        ("ja\u200by", "control or format characters"),  # zero-width space
        ("ja\u202ey", "control or format characters"),  # right-to-left override
        ("ja\u2028y", "line breaks"),
        ("ja\u2029y", "line breaks"),
        ("ja\ud800y", "control or format characters"),  # a lone surrogate
        ("\x00", "control or format characters"),
    ],
)
def test_a_user_id_that_could_pass_for_another_is_refused(raw: str, says: str):
    with pytest.raises(Unauthenticated, match=says):
        identity.canonical_user_id(raw)


def test_the_credential_headers_are_picked_out_in_any_case_and_others_ignored():
    headers = [("Authorization", "Bearer k"), ("X-USER-ID", "alice"), ("Accept", "x")]
    assert identity.credential_headers(headers) == {
        "authorization": "Bearer k",
        "x-user-id": "alice",
    }
    assert identity.credential_headers([("accept", "x")]) == {}


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        ([("authorization", "Bearer a"), ("Authorization", "Bearer b")], "Authorization"),
        ([("x-user-id", "alice"), ("X-User-Id", "alice")], "X-User-Id"),  # even the same one
    ],
)
def test_a_second_credential_header_is_refused_never_preferred(headers, named):
    with pytest.raises(Unauthenticated, match=f"send one `{named}` header, not several"):
        identity.credential_headers(headers)


def test_http_credential_headers_are_read_as_utf8_and_the_rest_is_left_alone():
    raw = [
        (b"X-User-Id", "\u00e5lice".encode()),
        (b"authorization", b"Bearer k"),
        (b"user-agent", b"\xff not utf-8, not a credential"),
    ]
    assert identity.http_headers(raw) == [
        ("x-user-id", "\u00e5lice"),
        ("authorization", "Bearer k"),
    ]


@pytest.mark.parametrize(
    ("name", "shown"), [(b"x-user-id", "X-User-Id"), (b"Authorization", "Authorization")]
)
def test_a_credential_header_that_is_not_utf8_is_refused_by_name(name: bytes, shown: str):
    with pytest.raises(Unauthenticated, match=f"the `{shown}` header is not valid UTF-8"):
        identity.http_headers([(name, b"\xe5lice")])
