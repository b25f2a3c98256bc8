"""Webhook signatures and targets, without a server: what verifies, which addresses and URLs
are refused."""

from __future__ import annotations

import ipaddress

import pytest

from memql.webhooks import signing, targets


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


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
     "0.0.0.0", "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "224.0.0.1"],
)  # fmt: skip
def test_non_public_addresses_are_refused(address: str):
    assert targets.refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700:4700::1111", "8.8.8.8"])
def test_public_addresses_are_accepted(address: str):
    assert targets.refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/x", "example.com/hook", "http:///nohost", "http://u:p@example.com/",
     "https://example.com/#frag", "http://example.com:99999/", "https://example.com/" + "a" * 2048],
)  # fmt: skip
def test_malformed_or_credentialed_urls_are_refused(url: str):
    with pytest.raises(targets.TargetRefused):
        targets.parse(url)


async def test_a_name_that_resolves_to_loopback_is_refused_unless_allowed():
    target = targets.parse("http://localhost:8080/hook")
    with pytest.raises(targets.TargetRefused, match="loopback"):
        await targets.checked_addresses(target, allow_private=False)
    assert await targets.checked_addresses(target, allow_private=True)
