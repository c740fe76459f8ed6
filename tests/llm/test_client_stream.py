"""``ModelClients.complete`` reading a stream through the host's transport (one pooled
``aiohttp`` session) from a raw HTTP server that sends exactly the bytes and the splits a test names: every token
reaches ``on_delta`` once and in order, a network chunk's events reach it as one delta
per channel, and a compressed stream reads the same."""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import AsyncIterator

import pytest
import pytest_asyncio

from skald_host.core.llm.catalog import ModelChoice
from skald_host.core.llm.client import ModelClients, ModelError
from skald_host.testing.model_server import self_signed_certificate


def event(delta: dict, finish: str | None = None) -> bytes:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


class RawServer:
    """Answers each POST with the chunks of ``self.chunks`` as an HTTP/1.1 chunked body,
    each written on its own after a pause, so each reaches the client as its own read."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.headers: dict[str, str] = {}
        self.request_lines: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.request_lines.append(head.split(b"\r\n")[0])
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        extra = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n{extra}connection: close\r\n\r\n".encode())
        for chunk in self.chunks:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
            await asyncio.sleep(0.005)  # its own read on the other side
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"


@pytest_asyncio.fixture
async def raw_server() -> AsyncIterator[RawServer]:
    server = RawServer()
    server.server = await asyncio.start_server(server._serve, "127.0.0.1", 0)
    try:
        yield server
    finally:
        server.server.close()


async def complete(server: RawServer, url: str | None = None) -> tuple[list[tuple[str, str]], str, str]:
    choice = ModelChoice("m", "m", "m", "p", "p", url or server.url, "key", vision=False, strength=1, priority=1)
    clients = ModelClients(timeout=10)
    deltas: list[tuple[str, str]] = []
    try:
        turn = await clients.complete(choice, [{"role": "user", "content": "hi"}], [], lambda channel, text: deltas.append((channel, text)))
    finally:
        await clients.close()
    return deltas, turn.content, turn.reasoning


async def test_each_chunks_events_reach_on_delta_as_one_delta_per_channel_in_order(raw_server):
    three = event({"content": "a"}) + event({"content": "b"}) + event({"content": "c"})
    mixed = event({"reasoning_content": "r1"}) + event({"reasoning_content": "r2"}) + event({"content": "d"}) + event({"content": "e"})
    raw_server.chunks = [
        event({"role": "assistant", "content": ""}),
        three,
        mixed,
        event({"content": "f"})[:20],  # an event split across reads
        event({"content": "f"})[20:] + event({}, "stop") + b"data: [DONE]\n\n",
    ]
    deltas, content, reasoning = await complete(raw_server)
    assert deltas == [("content", "abc"), ("reasoning", "r1r2"), ("content", "de"), ("content", "f")]
    assert (content, reasoning) == ("abcdef", "r1r2")


async def test_many_tokens_reach_on_delta_exactly_once_in_order(raw_server):
    words = [f"w{i} " for i in range(60)]
    body = b"".join(event({"content": w}) for w in words) + b"data: [DONE]\n\n"
    raw_server.chunks = [body[i:i + 300] for i in range(0, len(body), 300)]  # split anywhere, two or three events a chunk
    deltas, content, _ = await complete(raw_server)
    assert "".join(text for _, text in deltas) == content == "".join(words)
    assert len(deltas) < len(words)  # chunks holding several events went as one delta


async def test_crlf_stream_reads_the_same(raw_server):
    body = (event({"content": "x"}) + event({"content": "y"})).replace(b"\n", b"\r\n") + b"data: [DONE]\r\n\r\n"
    raw_server.chunks = [body[:body.index(b"\r") + 1], body[body.index(b"\r") + 1:]]  # CR | LF across reads
    deltas, content, _ = await complete(raw_server)
    assert content == "xy" and "".join(t for _, t in deltas) == "xy"


async def test_a_gzip_compressed_stream_is_decoded(raw_server):
    raw_server.headers = {"content-encoding": "gzip"}
    whole = gzip.compress(event({"content": "zipped"}) + b"data: [DONE]\n\n")
    raw_server.chunks = [whole[:10], whole[10:]]
    deltas, content, _ = await complete(raw_server)
    assert content == "zipped" and deltas == [("content", "zipped")]


async def test_an_error_event_mid_stream_is_a_model_error(raw_server):
    raw_server.chunks = [event({"content": "par"}), b'data: {"error": {"message": "overloaded"}}\n\n']
    with pytest.raises(ModelError, match="overloaded"):
        await complete(raw_server)


async def test_invalid_utf8_is_a_malformed_stream_not_a_crash(raw_server):
    raw_server.chunks = [b"data: \xff\xfe\n\n"]
    with pytest.raises(ModelError, match="malformed"):
        await complete(raw_server)


@pytest.mark.parametrize("suffix", ["", "/"])
async def test_the_request_goes_to_the_base_urls_completions_endpoint(raw_server, suffix):
    """The endpoint is passed to the SDK as an absolute URL (no join per request)."""
    raw_server.chunks = [event({"content": "ok"}) + b"data: [DONE]\n\n"]
    await complete(raw_server, raw_server.url + suffix)
    assert raw_server.request_lines == [b"POST /v1/chat/completions HTTP/1.1"]


async def test_a_base_url_with_a_query_keeps_it_on_the_endpoint(raw_server):
    """``?api-version=``: the SDK's own joining sent ``/v1/?api-version=1chat/completions``."""
    raw_server.chunks = [event({"content": "ok"}) + b"data: [DONE]\n\n"]
    await complete(raw_server, raw_server.url + "?api-version=1")
    assert raw_server.request_lines == [b"POST /v1/chat/completions?api-version=1 HTTP/1.1"]


async def test_sequential_requests_share_one_pooled_connection_with_the_providers_headers():
    """Keep-alive: a provider sees one TCP connection for a member's rounds, not one per
    request (a TLS handshake each, against a paid API); each request carries the key."""
    from skald_host.testing import ScriptedModelServer

    async with ScriptedModelServer(models=("m",), api_key="sk-pool") as server:
        server.script("m", ["one", "two", "three"])
        choice = ModelChoice("m", "m", "m", "p", "p", server.base_url, "sk-pool", vision=False, strength=1, priority=1)
        clients = ModelClients(timeout=10)
        try:
            answers = [(await clients.complete(choice, [{"role": "user", "content": "hi"}], [])).content for _ in range(3)]
        finally:
            await clients.close()
        assert answers == ["one", "two", "three"]
        assert server.connections_opened == 1
        assert [r.headers["authorization"] for r in server.requests] == ["Bearer sk-pool"] * 3
        assert all(r.headers["user-agent"].startswith("skald/") for r in server.requests)


async def test_a_stream_left_unread_drops_its_connection_so_the_provider_stops():
    """A Stop cancels the read: the connection is closed, not handed back to the pool
    half-read, so the provider sees the client leave and stops generating."""
    from skald_host.testing import Reply, ScriptedModelServer

    async with ScriptedModelServer(models=("m",)) as server:
        server.script("m", [Reply(text="slow " * 200, token_delay=0.02), "after"])
        choice = ModelChoice("m", "m", "m", "p", "p", server.base_url, "k", vision=False, strength=1, priority=1)
        clients = ModelClients(timeout=10)
        started = asyncio.Event()
        try:
            task = asyncio.ensure_future(clients.complete(choice, [{"role": "user", "content": "hi"}], [], lambda c, t: started.set()))
            await asyncio.wait_for(started.wait(), 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await server.wait_for_disconnects(1)
            # The next request goes out on a fresh connection and reads whole.
            assert (await clients.complete(choice, [{"role": "user", "content": "hi"}], [])).content == "after"
        finally:
            await clients.close()
        assert server.connections_opened == 2


async def test_a_private_ca_is_trusted_only_when_ssl_cert_file_names_it(raw_server, tmp_path, monkeypatch):
    import ssl

    cert, key = self_signed_certificate(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    tls = await asyncio.start_server(raw_server._serve, "127.0.0.1", 0, ssl=context)
    url = f"https://127.0.0.1:{tls.sockets[0].getsockname()[1]}/v1"
    raw_server.chunks = [event({"content": "private"}) + b"data: [DONE]\n\n"]
    try:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        with pytest.raises(ModelError, match="could not be reached: ClientConnectorCertificateError"):
            await complete(raw_server, url)
        monkeypatch.setenv("SSL_CERT_FILE", cert)
        _, content, _ = await complete(raw_server, url)
        assert content == "private"
    finally:
        tls.close()
