"""The address check for connectors a member registers, and for OAuth discovery: an
address must resolve to public IPs only (no loopback, private, link-local, metadata or
otherwise special address), unless the admin allowed private addresses for this
instance (a home network's own servers).

This checks the addresses the name resolves to when the member registers the server.
It does not yet pin the connected peer on every request (DNS rebinding after the check
is not caught); see the plugin's README, "Known gaps".
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from skald_mcp.spec import SpecError


async def check_public(url: str) -> None:
    """Raise ``SpecError`` unless every address ``url``'s host resolves to is public."""
    host = urlsplit(url).hostname or ""
    port = urlsplit(url).port or (443 if url.startswith("https") else 80)
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = await asyncio.to_thread(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise SpecError(f"the address {host!r} does not resolve") from None
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    for address in addresses:
        mapped = getattr(address, "ipv4_mapped", None)
        if not (mapped or address).is_global:
            raise SpecError(f"{host} points at a private or special address ({address}); only public servers may be added here")
