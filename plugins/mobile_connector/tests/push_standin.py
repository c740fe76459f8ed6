"""A local stand-in of a Web Push service (RFC 8030): it accepts the host's POSTs to a
subscription's endpoint and keeps them. The test plays the browser: it makes the
subscription's keys (an ECDH P-256 pair and an auth secret, as a browser's PushManager
does) and decrypts what arrived (RFC 8291, aes128gcm) with ``http_ece``, and checks the
VAPID signature (RFC 8292) against the key the plugin publishes. A mock only in that
no real push service can be reached from a test."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import http_ece
from aiohttp import web
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Subscription:
    """What a browser's ``PushManager.subscribe()`` would hand the app."""

    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes

    def as_json(self) -> dict[str, Any]:
        public = self.private_key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        return {"endpoint": self.endpoint, "keys": {"p256dh": b64url(public), "auth": b64url(self.auth)}}

    def decrypt(self, message: Received) -> bytes:
        return http_ece.decrypt(message.body, private_key=self.private_key, auth_secret=self.auth, version="aes128gcm")


@dataclass
class PushStandIn:
    received: list[Received] = field(default_factory=list)
    url: str = ""
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: Any = None
    #: Endpoint names answered 410 Gone (the browser dropped the subscription).
    gone: set[str] = field(default_factory=set)

    async def __aenter__(self) -> "PushStandIn":
        app = web.Application()
        app.router.add_post("/push/{name}", self._push)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._runner.cleanup()

    async def _push(self, request: web.Request) -> web.Response:
        self.received.append(Received(request.path, {k.lower(): v for k, v in request.headers.items()}, await request.read(), time.monotonic()))
        self._arrived.set()
        return web.Response(status=410 if request.match_info["name"] in self.gone else 201)

    def subscription(self, name: str) -> Subscription:
        return Subscription(f"{self.url}/push/{name}", ec.generate_private_key(ec.SECP256R1()), os.urandom(16))

    def to(self, name: str) -> list[Received]:
        return [r for r in self.received if r.path == f"/push/{name}"]

    async def wait(self, name: str, count: int = 1, timeout: float = 10.0) -> list[Received]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.to(name)) < count:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"{len(self.to(name))} push message(s) to {name} within {timeout} s, wanted {count}")
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                pass
        return self.to(name)


def verify_vapid(message: Received, public_key_b64: str) -> dict[str, Any]:
    """The claims of the message's VAPID JWT, after checking its ES256 signature with the
    server's published key (``k=`` must be that key)."""
    scheme, _, params = message.headers["authorization"].partition(" ")
    assert scheme.lower() == "vapid", message.headers["authorization"]
    fields = dict(part.strip().split("=", 1) for part in params.split(","))
    assert fields["k"] == public_key_b64
    header, payload, signature = fields["t"].split(".")
    raw = unb64url(signature)
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(public_key_b64))
    key.verify(
        encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
        f"{header}.{payload}".encode(),
        ec.ECDSA(hashes.SHA256()),
    )
    return json.loads(unb64url(payload))
