"""Where a webhook may be sent: http(s) URLs whose host resolves only to public addresses.

A deployment refuses private, loopback, link-local (and every other non-global) address unless
it sets `MEMQL_WEBHOOKS_ALLOW_PRIVATE=true`: otherwise a caller could make the server POST into
its own network. IPv6 addresses that embed an IPv4 address count as that IPv4 address, or are
refused outright (`refusal`): a NAT64 gateway or a 6to4 relay on the way would otherwise carry
a "global" IPv6 address to a metadata service or a VPC host. The host is resolved and every
address checked when an endpoint is registered, and again at each delivery, which then connects
to an address it checked (DNS may answer differently the second time: rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class TargetRefused(Exception):
    """This URL may not receive webhooks; the message says why."""


@dataclass(frozen=True)
class Target:
    url: str
    scheme: str
    host: str
    port: int


def parse(url: str) -> Target:
    """Check the URL's form (not where it points)."""
    if len(url) > MAX_URL_LENGTH:
        raise TargetRefused(f"the URL is longer than {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise TargetRefused(f"not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise TargetRefused("the URL must start with http:// or https://")
    if not parts.hostname:
        raise TargetRefused("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused(
            "credentials do not belong in the URL: receivers check the signature instead"
        )
    if parts.fragment:
        raise TargetRefused("the URL must not have a #fragment")
    return Target(
        url=parts.geturl(),
        scheme=parts.scheme,
        host=parts.hostname,
        port=port or (443 if parts.scheme == "https" else 80),
    )


def _networks(*pairs: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(net), reason) for net, reason in pairs)


# Every IPv4 range of IANA's special-purpose registry that is not a public host, plus 6to4's
# relay anycast; checked besides `is_global`, which differs between Python versions.
IPV4_REFUSED = _networks(
    ("0.0.0.0/8", "not a public address (this network)"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a private address (shared address space)"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local address"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "not a public address (IETF protocol assignments)"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.88.99.0/24", "a 6to4 relay address"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
)

# IPv6 ranges that carry an IPv4 address in their last 32 bits and reach it: the IPv4 address
# is checked instead (an IPv6 socket's view of IPv4; DNS64 on an IPv6-only network).
IPV6_EMBEDDING = _networks(
    ("::ffff:0:0/96", "IPv4-mapped"),
    ("64:ff9b::/96", "NAT64"),
)

# Within global unicast (2000::/3), the ranges that are not a public host: transition
# mechanisms whose embedded IPv4 address is hidden or obsolete, and the documentation ranges.
IPV6_REFUSED_GLOBAL = _networks(
    ("2001::/23", "an IPv6 protocol address (Teredo, benchmarking, ORCHID)"),
    ("2001:db8::/32", "a documentation address"),
    ("2002::/16", "a 6to4 address"),
    ("3fff::/20", "a documentation address"),
)
IPV6_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")

# Outside global unicast every address is refused; these only name the reason.
IPV6_REFUSED_OTHER = _networks(
    ("::1/128", "a loopback address"),
    ("::/128", "not a public address (unspecified)"),
    ("::/96", "an IPv4-compatible address"),
    ("::ffff:0:0:0/96", "an IPv4-translated (SIIT) address"),
    ("64:ff9b:1::/48", "a local-use NAT64 address"),
    ("100::/64", "a discard address"),
    ("fc00::/7", "a private address (unique local)"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
)


def _first_match(address: IPAddress, ranges: tuple[tuple[IPNetwork, str], ...]) -> str | None:
    for network, reason in ranges:
        if address in network:
            return reason
    return None


def _ipv4_refusal(address: ipaddress.IPv4Address) -> str | None:
    reason = _first_match(address, IPV4_REFUSED)
    if reason is None and not address.is_global:
        reason = "not a public address"
    return reason


def refusal(address: IPAddress) -> str | None:
    """Why a webhook may not go to `address`, or None when it is a public address.

    An IPv4 address must be public. An IPv6 address must be global unicast (2000::/3) outside
    the transition and documentation ranges, or embed, as IPv4-mapped or NAT64 (64:ff9b::/96),
    a public IPv4 address: every other IPv6 range that can carry an IPv4 address (6to4,
    Teredo, IPv4-compatible, SIIT, local-use NAT64) is refused whatever it carries, so no
    address translation on the way can turn an accepted address into a private one.
    """
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_refusal(address)
    for network, kind in IPV6_EMBEDDING:
        if address in network:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
            reason = _ipv4_refusal(embedded)
            return None if reason is None else f"the {kind} form of {embedded}, {reason}"
    if address in IPV6_GLOBAL_UNICAST:
        reason = _first_match(address, IPV6_REFUSED_GLOBAL)
    else:
        reason = _first_match(address, IPV6_REFUSED_OTHER) or "not a public address"
    if reason is None and not address.is_global:
        reason = "not a public address"
    return reason


async def resolve(target: Target) -> list[IPAddress]:
    """Every address the host resolves to (itself, when it is an address)."""
    try:
        return [ipaddress.ip_address(target.host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            target.host, target.port, type=socket.SOCK_STREAM
        )
    except OSError as exc:
        raise TargetRefused(f"cannot resolve {target.host}: {exc}") from None
    found: dict[IPAddress, None] = {}
    for info in infos:
        # the scope of an IPv6 link-local address ("fe80::1%eth0") is not part of the address
        found[ipaddress.ip_address(str(info[4][0]).split("%")[0])] = None
    if not found:
        raise TargetRefused(f"{target.host} resolves to no address")
    return list(found)


async def checked_addresses(target: Target, *, allow_private: bool) -> list[IPAddress]:
    """The addresses to deliver to; refused when any of them is not public (unless allowed)."""
    addresses = await resolve(target)
    if not allow_private:
        for address in addresses:
            reason = refusal(address)
            if reason is not None:
                raise TargetRefused(
                    f"{target.host} resolves to {address}, {reason}; webhooks go to public"
                    " addresses only (MEMQL_WEBHOOKS_ALLOW_PRIVATE=true allows others)"
                )
    return addresses
