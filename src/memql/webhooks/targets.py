"""Where a webhook may be sent: http(s) URLs whose host resolves only to public addresses.

A deployment refuses private, loopback, link-local (and every other non-global) address unless
it sets `MEMQL_WEBHOOKS_ALLOW_PRIVATE=true`: otherwise a caller could make the server POST into
its own network. The host is resolved and every address checked when an endpoint is registered,
and again at each delivery, which then connects to an address it checked (DNS may answer
differently the second time: rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


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


def refusal(address: IPAddress) -> str | None:
    """Why a webhook may not go to `address`, or None when it is a public address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_private:
        return "a private address"
    if not address.is_global or address.is_multicast:
        return "not a public address"
    return None


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
