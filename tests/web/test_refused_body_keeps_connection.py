"""A write refused before its body is read (the gate's 401) must not cost the client
its connection silently: a security probe's httpx client, posting with an expired
session, got "Server disconnected without sending a response" every few dozen requests,
because the server dropped the kept-alive connection after the answer without saying so.
Real server on 127.0.0.1, raw sockets, so nothing between hides what the server does."""

from __future__ import annotations

import asyncio

from skald_host.web.body import DRAIN_BYTES


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), 10)
    return int(lines[0].split()[1]), headers, body


async def test_a_refused_post_whose_body_comes_late_leaves_the_connection_usable(skald):
    host = await skald.start()
    address, port = host.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(address, int(port))
    try:
        writer.write(b"POST /api/conversations/abc/stop HTTP/1.1\r\nHost: skald\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.2)  # the gate refuses before the body is there
        writer.write(b"{}")
        await writer.drain()
        status, headers, _ = await read_response(reader)
        assert status == 401 and headers.get("connection", "").lower() != "close"

        writer.write(b"GET /health HTTP/1.1\r\nHost: skald\r\n\r\n")  # the same connection, kept alive
        await writer.drain()
        status, _, body = await read_response(reader)
        assert status == 200 and b'"ok"' in body
    finally:
        writer.close()


async def test_a_refused_post_with_a_large_body_says_the_connection_closes(skald):
    """Not read (an unsigned request must not make the server take it in), so the answer
    says ``Connection: close`` and the client knows not to send another on it."""
    host = await skald.start()
    address, port = host.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(address, int(port))
    try:
        size = DRAIN_BYTES * 16
        writer.write(f"POST /api/conversations/abc/stop HTTP/1.1\r\nHost: skald\r\nContent-Length: {size}\r\n\r\n".encode())
        await writer.drain()
        status, headers, _ = await read_response(reader)
        assert status == 401 and headers.get("connection", "").lower() == "close"
    finally:
        writer.close()
