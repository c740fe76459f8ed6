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

from typing import Any
from urllib.parse import urlsplit

from skald_hookspecs.net import AddressRefused, public_addresses

from skald_mcp.spec import SpecError

async def check_public(url: str) -> None:
    """Raise ``SpecError`` unless every address ``url``'s host resolves to is public."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        await public_addresses(host, parts.port or (443 if url.startswith("https") else 80))
    except AddressRefused as exc:
        if exc.reason == "private":
            raise SpecError(code="private_address", field="url", host=host[:100], address=exc.address or "") from None
        raise SpecError(code="address_unresolved", field="url", host=host[:100]) from None


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
                addresses = await public_addresses(host, port)
            except AddressRefused as exc:
                raise httpcore2.ConnectError(str(exc)) from None
            return await self._inner.connect_tcp(str(addresses[0]), port, timeout=timeout, local_address=local_address, socket_options=socket_options)

        async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
            raise httpcore2.ConnectError("unix sockets are not for connectors")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    transport = httpx2.AsyncHTTPTransport()
    transport._pool._network_backend = PinnedBackend()  # type: ignore[attr-defined]
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0), transport=transport)
