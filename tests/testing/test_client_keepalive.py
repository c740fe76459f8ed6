"""The test client must never reuse a connection the host is about to close: httpx
does not resend a request the server dropped unanswered, so a shared idle limit made
"Server disconnected without sending a response" a rare failure in any test."""

from __future__ import annotations

from skald_host.settings import Settings
from skald_host.testing.client import KEEPALIVE_EXPIRY_SECONDS, SkaldClient


async def test_the_client_lets_an_idle_connection_go_well_before_the_host_closes_it():
    host_idle_limit = Settings().server.header_timeout_seconds
    assert KEEPALIVE_EXPIRY_SECONDS <= host_idle_limit / 2
    client = SkaldClient("http://127.0.0.1:9")
    try:
        pool = client.http._transport._pool  # httpx keeps the limit on its connection pool
        assert pool._keepalive_expiry == KEEPALIVE_EXPIRY_SECONDS
    finally:
        await client.aclose()
