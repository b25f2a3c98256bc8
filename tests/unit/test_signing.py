"""`memql.webhooks.signing`: a signature verifies only for the same secret, the same body and a
fresh timestamp."""

from __future__ import annotations

from memql.webhooks import signing


def test_a_signature_verifies_only_for_the_same_secret_body_and_a_fresh_timestamp():
    secret, body, now = signing.new_secret(), b'{"cursor":"7"}', 1_800_000_000
    sig = signing.signature(secret, now, body)
    assert sig.startswith("v1=") and len(sig) == 3 + 64
    assert signing.verify(secret, body, str(now), sig, now=now + 10)
    # several signatures (e.g. while a secret changes): one match is enough
    assert signing.verify(secret, body, str(now), f"v1=00, {sig}", now=now)
    assert not signing.verify(secret, body + b" ", str(now), sig, now=now)
    assert not signing.verify(signing.new_secret(), body, str(now), sig, now=now)
    assert not signing.verify(secret, body, str(now + 1), sig, now=now)
    assert not signing.verify(secret, body, str(now), sig, now=now + 301)
    assert not signing.verify(secret, body, None, sig, now=now)
    assert not signing.verify(secret, body, "soon", sig, now=now)
