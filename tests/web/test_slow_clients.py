"""Check H3, slow clients: connections that dribble their headers or stall their body
are cut off on time, and while a hundred of them hang on, everyone else is answered
as quickly as before. Real sockets against a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time

HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.5
SLOW_CLIENTS = 100


async def dribble_headers(host: str, port: int) -> float:
    """A request line, then one header line a second, never the blank line: how long
    until the server hangs up."""
    reader, writer = await asyncio.open_connection(host, port)
    started = time.monotonic()
    writer.write(b"GET /health HTTP/1.1\r\nHost: skald\r\n")
    try:
        while not reader.at_eof() and time.monotonic() - started < 20:
            try:
                if await asyncio.wait_for(reader.read(1024), 0.5) == b"":
                    break
            except TimeoutError:
                writer.write(b"X-Slow: yes\r\n")
                await writer.drain()
    except ConnectionError:
        pass
    writer.close()
    return time.monotonic() - started


async def stall_body(host: str, port: int) -> tuple[float, bytes]:
    """A POST announcing 100 kB that sends one byte of it: how long until the answer."""
    reader, writer = await asyncio.open_connection(host, port)
    started = time.monotonic()
    writer.write(
        b"POST /api/auth/login HTTP/1.1\r\nHost: skald\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n{"
    )
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 20)
    writer.close()
    return time.monotonic() - started, status


async def test_slow_clients_are_cut_off_on_time_and_others_are_answered_meanwhile(skald):
    settings = skald.settings(server={"header_timeout_seconds": HEADER_TIMEOUT, "body_timeout_seconds": BODY_TIMEOUT})
    host = await skald.start(settings=settings)
    address, port = host.url.removeprefix("http://").split(":")
    client = host.client()
    quiet = []
    for _ in range(20):
        started = time.monotonic()
        assert (await client.get("/health")).status_code == 200
        quiet.append(time.monotonic() - started)

    slow = [asyncio.ensure_future(dribble_headers(address, int(port))) for _ in range(SLOW_CLIENTS // 2)]
    slow += [asyncio.ensure_future(stall_body(address, int(port))) for _ in range(SLOW_CLIENTS // 2)]
    await asyncio.sleep(0.2)
    busy = []
    for _ in range(20):
        started = time.monotonic()
        assert (await client.get("/health")).status_code == 200
        busy.append(time.monotonic() - started)
    results = await asyncio.gather(*slow)

    dribbled, stalled = results[: SLOW_CLIENTS // 2], results[SLOW_CLIENTS // 2 :]
    assert max(dribbled) < HEADER_TIMEOUT + 2, sorted(dribbled)[-3:]
    assert all(status.startswith(b"HTTP/1.1 408") for _, status in stalled), {s for _, s in stalled}
    assert max(seconds for seconds, _ in stalled) < BODY_TIMEOUT + 2
    p95 = lambda samples: sorted(samples)[int(len(samples) * 0.95) - 1]  # noqa: E731
    assert p95(busy) < max(2 * p95(quiet), 0.05), (p95(quiet), p95(busy))
