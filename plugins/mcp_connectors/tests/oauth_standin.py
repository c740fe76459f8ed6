"""A local OAuth 2 authorization server for the tests (aiohttp on 127.0.0.1): RFC 8414
metadata, an authorize endpoint that shows the code (the copy-paste flow's redirect page
in one), and a token endpoint that checks what a real one checks — the code used once,
the redirect URI exact, the client secret, the PKCE verifier against the S256
challenge — and records every token request for the tests to inspect."""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any

from aiohttp import web

CLIENT_ID = "skald-test-client"
CLIENT_SECRET = "cs-9a8b7c-admin-held"
REDIRECT_URI = "https://skald.example/oauth/show.html"


class AuthorizationServer:
    def __init__(self, *, s256: bool = True) -> None:
        self.s256 = s256
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests: list[dict[str, str]] = []
        self.codes: dict[str, dict[str, str]] = {}
        self.access_tokens: list[str] = []
        self.refresh_tokens: set[str] = set()

    async def __aenter__(self) -> "AuthorizationServer":
        app = web.Application()
        app.router.add_get("/.well-known/oauth-authorization-server", self.metadata)
        app.router.add_get("/authorize", self.authorize)
        app.router.add_post("/token", self.token)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.issuer = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.runner.cleanup()

    async def metadata(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "response_types_supported": ["code"],
        }
        if self.s256:
            body["code_challenge_methods_supported"] = ["S256"]
        return web.json_response(body)

    async def authorize(self, request: web.Request) -> web.Response:
        """The member's browser: consent is given at once, and the page shows the code."""
        query = dict(request.query)
        self.authorize_requests.append(query)
        if query.get("client_id") != CLIENT_ID or query.get("response_type") != "code":
            return web.Response(status=400, text="bad client or response type")
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            return web.Response(status=400, text="PKCE S256 required")
        code = secrets.token_urlsafe(16)
        self.codes[code] = query
        return web.Response(text=code)

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        self.token_requests.append(form)
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return web.json_response({"error": "invalid_client"}, status=401)
        if form.get("grant_type") == "refresh_token":
            if form.get("refresh_token") not in self.refresh_tokens:
                return web.json_response({"error": "invalid_grant"}, status=400)
            return web.json_response(self._issue(refresh=False))
        if form.get("grant_type") != "authorization_code":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        asked = self.codes.pop(str(form.get("code")), None)  # a code works once
        if asked is None:
            return web.json_response({"error": "invalid_grant"}, status=400)
        if form.get("redirect_uri") != asked.get("redirect_uri"):
            return web.json_response({"error": "invalid_grant", "error_description": "redirect_uri"}, status=400)
        verifier = str(form.get("code_verifier") or "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if challenge != asked.get("code_challenge"):
            return web.json_response({"error": "invalid_grant", "error_description": "pkce"}, status=400)
        return web.json_response(self._issue(refresh=True))

    def _issue(self, *, refresh: bool) -> dict[str, Any]:
        access = "at-" + secrets.token_urlsafe(12)
        self.access_tokens.append(access)
        body: dict[str, Any] = {"access_token": access, "token_type": "Bearer", "expires_in": 3600}
        if refresh:
            token = "rt-" + secrets.token_urlsafe(12)
            self.refresh_tokens.add(token)
            body["refresh_token"] = token
        return body
