"""Outbound addresses a member chose (spec 1.5): the check every plugin that connects
to a URL a member gave (a remote connector, a push endpoint, a webhook) makes, so
that the server is never made to reach its own machine or network (check F2).

The check is of the address a connection goes to, never of the URL's text alone: a
name that resolves to 127.0.0.1 is as private as the literal. ``public_addresses``
resolves a host and refuses unless every address is public; a client then connects to
one of the addresses it returned (not to the name, which would be resolved again and
could answer differently the second time: DNS rebinding), verifying TLS against the
name, and follows no redirect it has not checked the same way::

    from skald_hookspecs.net import AddressRefused, public_addresses

    try:
        addresses = await public_addresses(host, 443)
    except AddressRefused as exc:
        ...  # str(exc) says which address and why
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Union

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

#: IPv6 prefixes that carry an IPv4 address in their last 32 bits, which a translator
#: on the path delivers to: NAT64's well-known and local-use prefixes (RFC 6052, 8215),
#: the deprecated IPv4-compatible form and SIIT's IPv4-translated form (RFC 2765).
#: ``is_global`` judges the IPv6 address, so ``64:ff9b::a00:1`` would pass as public
#: while it reaches 10.0.0.1 (and Python calls ``::ffff:0:7f00:1`` global).
EMBEDDING = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/48", "::/96", "::ffff:0:0:0/96"))


class AddressRefused(ValueError):
    """A host that does not resolve, or resolves to an address that is not public.
    ``str()`` is an English sentence; ``reason`` (since 1.6) says why in a form a
    plugin can translate: ``"private"`` (``host`` resolved to ``address``, which is not
    public), ``"unresolved"`` or ``"no_host"``."""

    def __init__(self, message: str, *, reason: str = "unresolved", host: str = "", address: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.host = host
        self.address = address


def carried(address: Address) -> list[Address]:
    """The address and every IPv4 address it carries (mapped, 6to4, Teredo's client,
    NAT64, IPv4-compatible): each must be public."""
    if address.version == 4:
        return [address]
    inner = [address.ipv4_mapped, address.sixtofour, address.teredo[1] if address.teredo else None]
    inner += [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) for network in EMBEDDING if address in network]
    return [address, *(a for a in inner if a is not None)]


def is_public(address: Address) -> bool:
    """Whether a connection to ``address`` leaves for the public internet: no loopback,
    private, link-local (cloud metadata), multicast, reserved or shared address, nor
    one that carries such an IPv4 address."""
    # ``is_global`` alone lets through what Python files as global and reserved or
    # site-local at once (the deprecated ``fec0::/10``), so those are asked as well.
    return all(
        a.is_global and not (a.is_multicast or a.is_reserved or getattr(a, "is_site_local", False)) for a in carried(address)
    )


def check_address(host: str, address: Address) -> None:
    """Raise ``AddressRefused`` unless ``address`` (what ``host`` resolved to) is public."""
    if not is_public(address):
        raise AddressRefused(
            f"{host} points at a private or special address ({address}); only public servers may be used here",
            reason="private", host=host, address=str(address),
        )


def public_addresses_now(host: str, port: int) -> list[Address]:
    """``public_addresses`` for a thread that may block (it resolves the name)."""
    if not host:
        raise AddressRefused("the address names no host", reason="no_host")
    try:
        addresses: list[Address] = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise AddressRefused(f"the address {host!r} does not resolve", host=host) from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise AddressRefused(f"the address {host!r} does not resolve", host=host)
    for address in addresses:
        check_address(host, address)
    return addresses


async def public_addresses(host: str, port: int) -> list[Address]:
    """The addresses ``host`` resolves to, every one checked public (the name is
    resolved in a thread); ``AddressRefused`` otherwise. Connect to one of these."""
    return await asyncio.to_thread(public_addresses_now, host, port)
