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

The admin's allowance is live (``ConfigField(live=True)``: a save does not restart the
plugin), so the guarded client asks it when it matters, never from a copy: ``allowed``
is asked before a connection the check refuses is opened, and a client that opened one
asks it again before each request. Once the answer is no, every connection the client
holds is closed (a standing event stream too) and the request connects anew, through
the check, which refuses it: a session to a home server stops reaching it from its
next request on, not at its next restart.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit

from skald_hookspecs.net import AddressRefused, public_addresses

from skald_mcp.spec import SpecError

async def check_public(url: str, field: str = "url") -> None:
    """Raise ``SpecError`` unless every address ``url``'s host resolves to is public.
    ``field`` names the input the address came from (a provider's ``issuer``, whose
    body has no ``url``), so the page focuses the right box."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        await public_addresses(host, parts.port or (443 if url.startswith("https") else 80))
    except AddressRefused as exc:
        if exc.reason == "private":
            raise SpecError(code="private_address", field=field, host=host[:100], address=exc.address or "") from None
        raise SpecError(code="address_unresolved", field=field, host=host[:100]) from None


def guarded_client(headers: dict[str, str], allowed: Callable[[], Awaitable[bool]] | None = None, *, connect_seconds: float = 30.0) -> Any:
    """An ``httpx2`` client (the SDK's) whose every TCP connection goes to a checked,
    public address, or to a private one only while ``allowed()`` (the admin's *Allow
    private addresses*, read afresh at each ask) says yes; a request on a client that
    has opened such a connection asks ``allowed()`` again first (module docstring).
    Relies on httpx2's transport keeping an ``httpcore2`` pool. ``guard`` on the client
    tells whether it relied on the allowance (``Guard``)."""
    import httpcore2
    import httpx2

    guard = Guard(allowed)

    class PinnedBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self) -> None:
            from httpcore2._backends.auto import AutoBackend

            self._inner = AutoBackend()

        async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options: Any = None) -> Any:
            try:
                addresses = await public_addresses(host, port)
            except AddressRefused as exc:
                if exc.reason != "private" or not await guard.allows():
                    raise httpcore2.ConnectError(str(exc)) from None
                # Marked before it opens: a request racing this one asks again.
                guard.relied = True
                return await self._inner.connect_tcp(host, port, timeout=timeout, local_address=local_address, socket_options=socket_options)
            return await self._inner.connect_tcp(str(addresses[0]), port, timeout=timeout, local_address=local_address, socket_options=socket_options)

        async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
            raise httpcore2.ConnectError("unix sockets are not for connectors")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    class GuardedTransport(httpx2.AsyncHTTPTransport):
        async def handle_async_request(self, request: Any) -> Any:
            if await guard.withdrawn():
                # The allowance this client's connections relied on is gone: none of
                # them carries another byte; this request connects through the check.
                guard.relied = False
                await self._pool.aclose()
            return await super().handle_async_request(request)

    transport = GuardedTransport()
    transport._pool._network_backend = PinnedBackend()  # type: ignore[attr-defined]
    client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, connect=connect_seconds, read=300.0), transport=transport)
    client.guard = guard  # type: ignore[attr-defined]
    return client


class Guard:
    """One guarded client's use of the admin's allowance. ``relied``: it has opened a
    connection to an address the check refuses, which the allowance let through."""

    def __init__(self, allowed: Callable[[], Awaitable[bool]] | None) -> None:
        self._allowed = allowed
        self.relied = False

    async def allows(self) -> bool:
        """Whether private addresses are allowed now (asked, never remembered)."""
        return self._allowed is not None and bool(await self._allowed())

    async def withdrawn(self) -> bool:
        """Whether this client relied on the allowance and it is off now. Asks only a
        client that relied on it: one that reaches public servers pays nothing."""
        return self.relied and not await self.allows()
