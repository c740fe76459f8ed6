"""The address check for connectors a member registers, and for OAuth discovery: an
address must resolve to public IPs only (no loopback, private, link-local, metadata or
otherwise special address), unless the admin allowed private addresses for this
instance (a home network's own servers).

``check_public`` checks an address when the member registers it; ``guarded_client``
is the HTTP client the member's remote connector then talks through, which checks every
connection it opens: the name is resolved, every address must be public, and the socket
is opened to the address that was checked (never resolved again in between), so a name
that later points at a private address (DNS rebinding) is refused on that connection.
TLS still verifies the certificate against the name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from skald_mcp.spec import SpecError


#: IPv6 prefixes that carry an IPv4 address in their last 32 bits, which a translator
#: on the path delivers to: NAT64's well-known and local-use prefixes (RFC 6052, 8215)
#: and the deprecated IPv4-compatible form. ``is_global`` judges the IPv6 address, so
#: ``64:ff9b::a00:1`` would pass as public while it reaches 10.0.0.1.
EMBEDDING = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/48", "::/96"))


def _carried(address: Any) -> list[Any]:
    """The address and every IPv4 address it carries (mapped, 6to4, Teredo's client,
    NAT64, IPv4-compatible): each must be public."""
    if address.version == 4:
        return [address]
    carried = [address.ipv4_mapped, address.sixtofour, address.teredo[1] if address.teredo else None]
    carried += [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) for network in EMBEDDING if address in network]
    return [address, *(a for a in carried if a is not None)]


def _refuse(host: str, address: Any) -> None:
    if not all(a.is_global for a in _carried(address)):
        raise SpecError(f"{host} points at a private or special address ({address}); only public servers may be added here")


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
        _refuse(host, address)


def guarded_client(headers: dict[str, str]) -> Any:
    """An ``httpx2`` client (the SDK's) whose every TCP connection goes to a checked,
    public address. Relies on httpx2's transport keeping an ``httpcore2`` pool."""
    import httpcore2
    import httpx2

    class PinnedBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self) -> None:
            from httpcore2._backends.auto import AutoBackend

            self._inner = AutoBackend()

        async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options: Any = None) -> Any:
            try:
                literal = ipaddress.ip_address(host)
                addresses = [literal]
            except ValueError:
                infos = await asyncio.to_thread(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
                addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
            if not addresses:
                raise httpcore2.ConnectError(f"{host} does not resolve")
            for address in addresses:
                try:
                    _refuse(host, address)
                except SpecError as exc:
                    raise httpcore2.ConnectError(str(exc)) from None
            return await self._inner.connect_tcp(str(addresses[0]), port, timeout=timeout, local_address=local_address, socket_options=socket_options)

        async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
            raise httpcore2.ConnectError("unix sockets are not for connectors")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    transport = httpx2.AsyncHTTPTransport()
    transport._pool._network_backend = PinnedBackend()  # type: ignore[attr-defined]
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0), transport=transport)
