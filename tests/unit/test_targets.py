"""`memql.webhooks.targets`: which addresses and URLs a webhook may be sent to, without a
server: private, loopback, link-local and special addresses are refused, however they are
spelled or resolved."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import pytest

from memql.webhooks import targets


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
     "0.0.0.0", "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "224.0.0.1"],
)  # fmt: skip
def test_non_public_addresses_are_refused(address: str):
    assert targets.refusal(ipaddress.ip_address(address)) is not None


# the addresses of the attack: each was accepted as "global" (Python's `ipaddress` calls them so)
TRANSITION_ATTACKS = [
    "64:ff9b::a9fe:a9fe", "64:ff9b::a00:1", "64:ff9b:1::a00:1", "2002:7f00:1::",
    "2002:a9fe:a9fe::", "::7f00:1", "::ffff:0:7f00:1", "fec0::1",
]  # fmt: skip
# the rest of IANA's special-purpose IPv6 and IPv4 ranges that `is_global` lets through or that
# no receiver lives in
OTHER_SPECIAL = [
    "100::1", "2001::1", "2001:2::1", "2001:10::1", "2001:20::1", "2001:db8::1", "3fff::1",
    "5f00::1", "ff0e::1", "::", "192.0.0.8", "192.88.99.1", "198.18.0.1", "198.51.100.7",
    "203.0.113.9", "240.0.0.1", "255.255.255.255",
]  # fmt: skip


@pytest.mark.parametrize("address", TRANSITION_ATTACKS + OTHER_SPECIAL)
def test_ipv6_transition_and_other_special_addresses_are_refused(address: str):
    assert targets.refusal(ipaddress.ip_address(address)) is not None


def embeddings(v4: ipaddress.IPv4Address) -> dict[str, ipaddress.IPv6Address]:
    """`v4` inside every IPv6 range that can carry an IPv4 address."""
    n = int(v4)
    return {
        "IPv4-mapped": ipaddress.IPv6Address((0xFFFF << 32) | n),
        "IPv4-compatible": ipaddress.IPv6Address(n),
        "SIIT": ipaddress.IPv6Address((0xFFFF << 48) | n),
        "NAT64": ipaddress.IPv6Address((0x64FF9B << 96) | n),
        "NAT64 local-use /96": ipaddress.IPv6Address((0x64FF9B0001 << 80) | n),
        "NAT64 local-use /48": ipaddress.IPv6Address((0x64FF9B0001 << 80) | (n << 40)),
        "6to4": ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1),
        "Teredo": ipaddress.IPv6Address((0x20010000 << 96) | (n << 64) | (~n & 0xFFFFFFFF)),
    }


@pytest.mark.parametrize(
    "v4", ["127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
           "0.0.0.0", "198.18.0.1", "224.0.0.1"],
)  # fmt: skip
def test_no_ipv6_embedding_of_a_refused_ipv4_address_is_accepted(v4: str):
    """The class, not the examples: whatever the embedding, a non-public IPv4 address inside
    an IPv6 address is refused."""
    inner = ipaddress.IPv4Address(v4)
    assert targets.refusal(inner) is not None
    for kind, address in embeddings(inner).items():
        assert targets.refusal(address) is not None, (kind, address)


def test_public_ipv4_addresses_are_accepted_through_mapped_and_nat64_only():
    public = ipaddress.IPv4Address("8.8.8.8")
    accepted = {k for k, a in embeddings(public).items() if targets.refusal(a) is None}
    assert accepted == {"IPv4-mapped", "NAT64"}
    assert "169.254.169.254" in str(targets.refusal(ipaddress.ip_address("64:ff9b::a9fe:a9fe")))


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "2606:4700:4700::1111", "8.8.8.8", "2a00:1450:4001:80b::200e",
                "::ffff:8.8.8.8", "64:ff9b::808:808"],
)  # fmt: skip
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


@pytest.mark.parametrize("address", TRANSITION_ATTACKS)
async def test_a_url_naming_a_transition_address_is_refused(address: str):
    target = targets.parse(f"http://[{address}]:8080/hook")
    with pytest.raises(targets.TargetRefused, match="webhooks go to public addresses only"):
        await targets.checked_addresses(target, allow_private=False)


async def test_a_name_whose_dns_answer_is_a_transition_address_is_refused(monkeypatch):
    """DNS answers go through the same rule: a name of the caller's that resolves (among
    others) to the NAT64 form of the metadata address is refused. The resolver is the one
    stand-in here: there is no DNS server to configure offline."""
    answers = ["93.184.215.14", "64:ff9b::a9fe:a9fe"]

    async def getaddrinfo(host, port, *, type=0, **_):
        assert host == "hooks.example.test"
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, type, 6, "", (a, port))
            for a in answers
        ]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    target = targets.parse("https://hooks.example.test/memql")
    with pytest.raises(targets.TargetRefused, match=r"169\.254\.169\.254"):
        await targets.checked_addresses(target, allow_private=False)
    answers[1] = "64:ff9b::808:808"
    assert len(await targets.checked_addresses(target, allow_private=False)) == 2
