"""An HTTP + WebSocket client that behaves like the browser UI does: it keeps the
session cookie (sent even over http://127.0.0.1, where browsers treat Secure cookies
as allowed but Python's cookie jar does not), sends the CSRF header on writes and a
same-origin ``Origin`` on WebSocket handshakes."""

from __future__ import annotations

from http.cookies import SimpleCookie
from typing import Any

import httpx

from skald_host.web.auth import CSRF_HEADER, PLAIN_COOKIE, SECURE_COOKIE


# The host closes a connection idle for ``server.header_timeout_seconds`` (5 s by
# default), and httpx kept idle connections for 5 s too: a request sent on one just as
# the server closed it failed with "Server disconnected without sending a response"
# (once in a clean-clone CI run). Browsers resend such a request; httpx does not, so
# the client lets an idle connection go well before the server would.
KEEPALIVE_EXPIRY_SECONDS = 2.0


class SkaldClient:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = httpx.AsyncClient(
            base_url=self.base_url, timeout=30.0, limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS)
        )
        self.cookies: dict[str, str] = {}
        self.csrf_token: str | None = None
        self.bearer: str | None = None
        self.member: dict[str, Any] | None = None

    async def aclose(self) -> None:
        await self.http.aclose()

    def _absorb(self, response: httpx.Response) -> None:
        for header in response.headers.get_list("set-cookie"):
            jar = SimpleCookie()
            jar.load(header)
            for name, morsel in jar.items():
                if name in (SECURE_COOKIE, PLAIN_COOKIE):
                    if morsel.value and morsel["max-age"] != "0" and "1970" not in (morsel["expires"] or ""):
                        self.cookies[name] = morsel.value
                    else:
                        self.cookies.pop(name, None)

    def headers(self, method: str = "GET", extra: dict[str, str] | None = None) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if self.bearer:
            headers["Authorization"] = f"Bearer {self.bearer}"
        if method.upper() not in ("GET", "HEAD", "OPTIONS") and self.csrf_token:
            headers[CSRF_HEADER] = self.csrf_token
        headers.update(extra or {})
        return headers

    async def request(self, method: str, path: str, *, headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        response = await self.http.request(method, path, headers=self.headers(method, headers), **kwargs)
        self._absorb(response)
        return response

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("POST", path, **kwargs)

    async def put(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PUT", path, **kwargs)

    async def patch(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PATCH", path, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.request("DELETE", path, **kwargs)

    async def login(self, username: str, password: str, *, bearer: bool = False) -> httpx.Response:
        body = {"username": username, "password": password, "session": "bearer" if bearer else "cookie"}
        response = await self.post("/api/auth/login", json=body)
        if response.status_code == 200:
            data = response.json()
            self.member = data["member"]
            if bearer:
                self.bearer = data["token"]
            else:
                self.csrf_token = data["csrf_token"]
        return response

    async def chat(self, text: str, *, conversation: str | None = None, agent: str | None = None, timeout: float = 30.0) -> Any:
        """Send ``text`` (in a new conversation unless ``conversation`` is given) over
        plain HTTP and return the ``Turn`` once the agent has finished it, with its tool
        results, or once it waits for an approval (``turn.waiting``)."""
        from skald_host.testing.chat import chat

        return await chat(self, text, conversation=conversation, agent=agent, timeout=timeout)

    @property
    def session_token(self) -> str | None:
        return self.bearer or self.cookies.get(SECURE_COOKIE) or self.cookies.get(PLAIN_COOKIE)

    def ws(self, path: str = "/api/ws", *, origin: str | None = "same", headers: dict[str, str] | None = None) -> Any:
        """A ``websockets`` connection (use with ``async with``)."""
        from websockets.asyncio.client import connect

        url = "ws" + self.base_url[4:] + path
        extra = self.headers("GET", headers)
        return connect(
            url,
            origin=self.base_url if origin == "same" else origin,  # type: ignore[arg-type]
            additional_headers=extra,
            open_timeout=10,
            proxy=None,
        )
