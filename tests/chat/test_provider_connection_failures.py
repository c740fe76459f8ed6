"""A provider's connection test said aiohttp's own words as its headline ("Cannot connect
to host 127.0.0.1:9 ssl:default [Connect call failed …]"), whatever went wrong (newcomer
report, fix 9). Each way a connection fails now has its code, with the host and port the
page words it with in en and de; the raw words stay, as ``why``, for the detail."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
from pathlib import Path

import pytest

import skald_host
from skald_host.testing.model_server import self_signed_certificate


LOCALES = Path(skald_host.__file__).parent / "builtins" / "locales"
CODES = ("model_connection_refused", "model_host_not_found", "model_tls_failed", "model_certificate_untrusted", "model_cannot_connect",
         "model_certificate_wrong_name", "model_certificate_expired", "model_certificate_not_yet_valid")


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


def _certificate(directory: Path, name: str, *, san: bool = True, starts: int = -1, ends: int = 1) -> tuple[str, str]:
    """A self-signed certificate for CN=127.0.0.1 (O=``name``), valid from ``starts`` to ``ends`` days
    from now; ``san=False`` leaves out its subjectAltName (OpenSSL then matches no
    address against it: the common name is not looked at)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    # Each its own subject: OpenSSL finds an issuer in SSL_CERT_FILE by its name.
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, name), x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now + datetime.timedelta(days=starts)).not_valid_after(now + datetime.timedelta(days=ends))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    cert = builder.sign(key, hashes.SHA256())
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return str(cert_path), str(key_path)


async def test_a_trusted_certificate_that_is_wrong_for_the_connection_is_not_said_untrusted(chat, tmp_path, monkeypatch):
    """aiohttp raises one error for every certificate it refuses: a self-signed one for
    CN=127.0.0.1 without subjectAltName, itself in SSL_CERT_FILE, was said to be untrusted
    (name its CA in SSL_CERT_FILE: done already), the real cause only under Technical
    detail (newcomer report). OpenSSL's verdict decides the code now."""
    made = {name: _certificate(tmp_path, name, **shape) for name, shape in {
        "no_san": {"san": False}, "expired": {"starts": -3, "ends": -1}, "future": {"starts": 1, "ends": 3},
        "named": {}}.items()}
    bundle = tmp_path / "bundle.pem"
    bundle.write_text("".join(Path(cert).read_text() for cert, _ in made.values()))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    servers = {}
    for name, (cert, key) in made.items():
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        servers[name] = await asyncio.start_server(_plain_http, "127.0.0.1", 0, ssl=context)
    port = {name: server.sockets[0].getsockname()[1] for name, server in servers.items()}
    try:
        said = {
            "no_san": await _test(chat.admin, f"https://127.0.0.1:{port['no_san']}/v1"),
            "expired": await _test(chat.admin, f"https://127.0.0.1:{port['expired']}/v1"),
            "future": await _test(chat.admin, f"https://127.0.0.1:{port['future']}/v1"),
            # The name the address uses is not one the certificate names (it names 127.0.0.1).
            "host_name": await _test(chat.admin, f"https://localhost:{port['named']}/v1"),
        }
    finally:
        for server in servers.values():
            server.close()
    codes = {name: body["code"] for name, body in said.items()}
    assert codes == {
        "no_san": "model_certificate_wrong_name",
        "expired": "model_certificate_expired",
        "future": "model_certificate_not_yet_valid",
        "host_name": "model_certificate_wrong_name",
    }, said
    assert said["no_san"]["values"]["host"] == "127.0.0.1" and said["host_name"]["values"]["host"] == "localhost"
    assert "mismatch" in said["no_san"]["values"]["why"], said["no_san"]  # OpenSSL's words, for the detail
    strings = json.loads((LOCALES / "en.json").read_text())
    wrong_name = strings["models.test_error.model_certificate_wrong_name"].format(**said["no_san"]["values"])
    assert "subjectAltName" in wrong_name and "SSL_CERT_FILE" not in wrong_name, wrong_name


@pytest.mark.parametrize("locale", ["en", "de"])
def test_every_connection_code_is_worded_without_the_raw_text(locale):
    strings = json.loads((LOCALES / f"{locale}.json").read_text())
    for code in CODES:
        for key in (f"models.test_error.{code}", f"error.{code}"):
            text = strings[key].format(host="example.org", port=443, why="RAW")
            assert "example.org" in text and "RAW" not in text, (key, text)
    assert "RAW" in strings["models.test_detail_text"].format(why="RAW")
