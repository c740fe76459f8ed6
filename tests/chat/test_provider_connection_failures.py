"""A provider's connection test said aiohttp's own words as its headline ("Cannot connect
to host 127.0.0.1:9 ssl:default [Connect call failed …]"), whatever went wrong (newcomer
report, fix 9). Each way a connection fails now has its code, with the host and port the
page words it with in en and de; the raw words stay, as ``why``, for the detail."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import pytest

import skald_host
from skald_host.testing.model_server import self_signed_certificate


LOCALES = Path(skald_host.__file__).parent / "builtins" / "locales"
CODES = ("model_connection_refused", "model_host_not_found", "model_tls_failed", "model_certificate_untrusted", "model_cannot_connect")


async def _test(admin, base_url: str) -> dict:
    created = await admin.post("/api/admin/models/providers", json={"name": base_url[:90], "base_url": base_url})
    assert created.status_code == 201, created.text
    response = await admin.post(f"/api/admin/models/providers/{created.json()['id']}/test")
    assert response.status_code == 200, response.text
    return response.json()


async def _plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
    await writer.drain()
    writer.close()


async def test_each_way_a_connection_fails_is_said_with_its_host_and_port(chat, tmp_path, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    plain = await asyncio.start_server(_plain_http, "127.0.0.1", 0)
    cert, key = self_signed_certificate(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    private = await asyncio.start_server(_plain_http, "127.0.0.1", 0, ssl=context)
    plain_port, private_port = (server.sockets[0].getsockname()[1] for server in (plain, private))
    try:
        refused = await _test(chat.admin, "http://127.0.0.1:9/v1")
        tls = await _test(chat.admin, f"https://127.0.0.1:{plain_port}/v1")  # https:// to a server that speaks http
        unknown = await _test(chat.admin, "https://no-such-host.invalid/v1")
        untrusted = await _test(chat.admin, f"https://127.0.0.1:{private_port}/v1")
    finally:
        for server in (plain, private):
            server.close()
    said = {body["code"]: (body["values"]["host"], body["values"]["port"]) for body in (refused, tls, unknown, untrusted)}
    assert said == {
        "model_connection_refused": ("127.0.0.1", 9),
        "model_tls_failed": ("127.0.0.1", plain_port),
        "model_host_not_found": ("no-such-host.invalid", 443),
        "model_certificate_untrusted": ("127.0.0.1", private_port),
    }, [refused, tls, unknown, untrusted]
    # aiohttp's words are kept for the detail, not lost.
    assert refused["values"]["why"].startswith("Cannot connect to host 127.0.0.1:9"), refused
    assert all(body["ok"] is False and body["status"] is None for body in (refused, tls, unknown, untrusted))


@pytest.mark.parametrize("locale", ["en", "de"])
def test_every_connection_code_is_worded_without_the_raw_text(locale):
    strings = json.loads((LOCALES / f"{locale}.json").read_text())
    for code in CODES:
        for key in (f"models.test_error.{code}", f"error.{code}"):
            text = strings[key].format(host="example.org", port=443, why="RAW")
            assert "example.org" in text and "RAW" not in text, (key, text)
    assert "RAW" in strings["models.test_detail_text"].format(why="RAW")
