"""OAuth 2 sign-in for a member's connector: authorization code + PKCE (S256), the
copy-paste flow (seed 001 "OAuth per-user connectors").

- Providers are the admin's: endpoints, client id and client secret (write-only on the
  page), redirect URI, extra parameters. A provider given by its ``issuer`` is read from
  its RFC 8414 metadata, which must offer ``S256`` in
  ``code_challenge_methods_supported`` (otherwise it is refused: no flow without PKCE).
  Discovery passes the address check unless private addresses are allowed.
- ``start`` builds the consent URL with a fresh verifier and an opaque ``state``, kept
  in RAM only, for 10 minutes, bound to the member and to the login session that
  started it (``Caller.session_id``, or the device token's id), usable once (a restart drops every
  flow in progress). A member has a few open at a time, per connector and in all
  (a new start replaces their oldest), so no one member can fill the shared cap.
- The member approves at the provider, which shows the code on the redirect page; the
  member pastes it back; ``complete`` exchanges code + verifier (+ the client secret,
  server-side, + ``resource``: the connector's address) for tokens. The refresh token is
  written to the member's encrypted file only (in the connector's record); the access
  token stays in RAM and reaches the server as ``Authorization: Bearer``.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlencode

from skald_mcp.spec import NAME, SpecError, _text, parse_url, unknown_fields

STATE_SECONDS = 600
#: Open sign-ins, all members together: a last resort only. Each member has a share
#: of their own (``MEMBER_FLOWS``, ``CONNECTOR_FLOWS``), so one member starting sign-ins
#: over and over replaces their own older ones and never fills this for everyone.
MAX_FLOWS = 1000
#: Open sign-ins of one member for one connector (a second tab, a retry); a new start
#: beyond it replaces the member's oldest for that connector.
CONNECTOR_FLOWS = 3
#: Open sign-ins of one member, all their connectors together; a new start beyond it
#: replaces the member's oldest.
MEMBER_FLOWS = 10
#: The longest code a provider's page is taken to show.
MAX_CODE = 4096
TOKEN_SECONDS = 20.0


class OAuthError(SpecError):
    """A sign-in step failed; shown to the member, so it is coded as a ``SpecError`` is
    (``OAuthError(code=..., **values)``, the text ``err_<code>`` of strings.py) and the
    routes answer it in the member's language."""


@dataclass(frozen=True)
class Flow:
    member_id: str
    #: The login session (or device token) that started the sign-in: only it may complete
    #: it (check E5: state "bound to the session"), so a state seen by another of the
    #: member's sessions (a shared computer, a leaked link) signs nothing in.
    session: str
    connector: str
    provider: str
    verifier: str
    redirect_uri: str
    resource: str
    started: float


def pasted_code(code: Any) -> str:
    """The code the member pasted back, trimmed; refused when empty or too long. Asked
    before the one-time state is taken (routes.py): a slip of the paste does not use up
    the sign-in."""
    if not isinstance(code, str) or not code.strip() or len(code) > MAX_CODE:
        raise OAuthError(code="oauth_code_missing", field="code")
    return code.strip()


def pkce_pair() -> tuple[str, str]:
    """A verifier (43+ characters of the unreserved set) and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def parse_provider(body: Any, keep: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A provider from the admin's form, without discovery (``issuer`` is resolved by
    ``OAuth.discover``). A masked secret keeps the stored one."""
    if not isinstance(body, dict):
        raise SpecError(code="body_not_object")
    unknown = set(body) - {"name", "issuer", "auth_url", "token_url", "client_id", "client_secret", "redirect_uri", "extra_params"}
    if unknown:
        raise unknown_fields(unknown)
    name = body.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise SpecError(code="name_invalid", field="name")
    secret = body.get("client_secret")
    masked = secret == "********" and keep is not None
    extra = body.get("extra_params") or {}
    if not isinstance(extra, dict) or not all(isinstance(k, str) and isinstance(v, str) and len(k) <= 100 and len(v) <= 500 for k, v in extra.items()):
        raise SpecError(code="extra_params_invalid", field="extra_params")
    reserved = {"response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method", "resource"}
    if reserved & set(extra):
        raise SpecError(code="extra_params_reserved", field="extra_params", names=", ".join(sorted(reserved & set(extra))))
    provider = {
        "name": name,
        "issuer": _text(body, "issuer", limit=2000),
        "auth_url": _text(body, "auth_url", limit=2000),
        "token_url": _text(body, "token_url", limit=2000),
        "client_id": _text(body, "client_id", required=True),
        "client_secret": secret if isinstance(secret, str) and len(secret) <= 2000 else "",
        "redirect_uri": parse_url(body.get("redirect_uri"), "redirect_uri"),
        "extra_params": dict(extra),
    }
    if provider["issuer"]:
        parse_url(provider["issuer"], "issuer")
    else:
        provider["auth_url"] = parse_url(provider["auth_url"], "auth_url")
        provider["token_url"] = parse_url(provider["token_url"], "token_url")
    if masked:
        # The stored secret follows only where it went (``token_destination``): a new
        # token URL or issuer with the masked value would send it there unasked.
        if token_destination(provider) != token_destination(keep):
            raise SpecError(code="secret_reenter", field="client_secret", name="client_secret")
        provider["client_secret"] = keep.get("client_secret", "")
    return provider


def token_destination(provider: Mapping[str, Any]) -> tuple[str, str]:
    """Where a provider's client secret is sent: its issuer (whose metadata names the
    token endpoint), else its explicit token URL."""
    issuer = provider.get("issuer") or ""
    return (issuer, "" if issuer else provider.get("token_url") or "")


def public_provider(provider: Mapping[str, Any]) -> dict[str, Any]:
    return {**provider, "client_secret": "********" if provider.get("client_secret") else ""}


class OAuth:
    def __init__(self, host: Any) -> None:
        self.host = host
        self.providers: dict[str, dict[str, Any]] = {}
        self._flows: dict[str, Flow] = {}
        #: (member id, connector) -> (access token, monotonic expiry). RAM only.
        self._tokens: dict[tuple[str, str], tuple[str, float]] = {}

    async def load(self) -> None:
        self.providers = dict(await self.host.kv_get("providers") or {})

    async def save(self) -> None:
        await self.host.kv_set("providers", self.providers)

    def forget(self, member_id: str) -> None:
        """The member's file closes: their access tokens and flows leave RAM."""
        self._tokens = {k: v for k, v in self._tokens.items() if k[0] != member_id}
        self._flows = {k: f for k, f in self._flows.items() if f.member_id != member_id}

    # -- providers --------------------------------------------------------------------------

    async def discover(self, provider: dict[str, Any], *, allow_private: bool) -> dict[str, Any]:
        """Fill the endpoints from the issuer's metadata; refuse one without S256."""
        if not provider.get("issuer"):
            return provider
        import httpx

        from skald_mcp.guard import check_public

        url = provider["issuer"].rstrip("/") + "/.well-known/oauth-authorization-server"
        if not allow_private:
            await check_public(url, "issuer")
        try:
            async with httpx.AsyncClient(timeout=TOKEN_SECONDS, follow_redirects=False) as client:
                response = await client.get(url, headers={"Accept": "application/json"})
            metadata = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            metadata = None
        if not isinstance(metadata, dict):
            raise SpecError(code="oauth_no_metadata", field="issuer", url=url[:300])
        if "S256" not in (metadata.get("code_challenge_methods_supported") or []):
            raise SpecError(code="oauth_no_pkce", field="issuer")
        provider = dict(provider)
        provider["auth_url"] = parse_url(metadata.get("authorization_endpoint"), "authorization_endpoint")
        provider["token_url"] = parse_url(metadata.get("token_endpoint"), "token_endpoint")
        if not allow_private:
            # The token endpoint came from the issuer's metadata: the issuer is at fault.
            await check_public(provider["token_url"], "issuer")
        return provider

    # -- the flow ---------------------------------------------------------------------------

    def _expire(self) -> None:
        now = time.monotonic()
        self._flows = {k: f for k, f in self._flows.items() if now - f.started < STATE_SECONDS}

    def start(self, member_id: str, session: str, connector: str, provider_name: str, scopes: list[str], resource: str) -> str:
        provider = self.providers.get(provider_name)
        if provider is None or not provider.get("auth_url"):
            raise OAuthError(code="oauth_provider_not_set_up", provider=repr(provider_name))
        self._expire()
        self._make_room(member_id, connector)
        if len(self._flows) >= MAX_FLOWS:
            raise OAuthError(code="oauth_busy")
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(32)
        self._flows[state] = Flow(member_id, session, connector, provider_name, verifier, provider["redirect_uri"], resource, time.monotonic())
        query = {
            **provider.get("extra_params", {}),
            "response_type": "code",
            "client_id": provider["client_id"],
            "redirect_uri": provider["redirect_uri"],
            "scope": " ".join(scopes),
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            **({"resource": resource} if resource else {}),  # none for a stdio server (RFC 8707 wants a URI)
        }
        separator = "&" if "?" in provider["auth_url"] else "?"
        return f"{provider['auth_url']}{separator}{urlencode(query)}"

    def _make_room(self, member_id: str, connector: str) -> None:
        """Below the member's own caps for one more flow: their oldest flows for this
        connector, then their oldest of all, make way (never another member's)."""
        mine = sorted(((f.started, s) for s, f in self._flows.items() if f.member_id == member_id), key=lambda pair: pair[0])
        here = [pair for pair in mine if self._flows[pair[1]].connector == connector]
        for _, state in here[: max(0, len(here) - CONNECTOR_FLOWS + 1)]:
            del self._flows[state]
        mine = [pair for pair in mine if pair[1] in self._flows]
        for _, state in mine[: max(0, len(mine) - MEMBER_FLOWS + 1)]:
            del self._flows[state]

    def take(self, member_id: str, session: str, connector: str, state: Any) -> Flow:
        """The flow of ``state``, once: unknown, expired, used, or another member's,
        session's or connector's state is refused (and stays for its own session)."""
        self._expire()
        flow = self._flows.get(state) if isinstance(state, str) else None
        if flow is None or flow.member_id != member_id or flow.session != session or flow.connector != connector:
            raise OAuthError(code="oauth_state_unknown")
        del self._flows[state]
        return flow

    async def exchange(self, flow: Flow, code: Any) -> dict[str, Any]:
        code = pasted_code(code)
        provider = self.providers.get(flow.provider)
        if provider is None:
            raise OAuthError(code="oauth_provider_gone")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": flow.redirect_uri,
            "code_verifier": flow.verifier,
            **({"resource": flow.resource} if flow.resource else {}),
        }
        try:
            tokens = await self._token_request(provider, form)
        except OAuthError as exc:
            if exc.code == "oauth_refused" and exc.values.get("reason") == "invalid_grant":
                # The flow was taken (single-use) before the code was sent: pasting again
                # cannot work; a new sign-in can.
                raise OAuthError(code="oauth_code_refused") from None
            raise
        if not tokens.get("refresh_token"):
            raise OAuthError(code="oauth_no_refresh_token")
        self._remember(flow.member_id, flow.connector, tokens)
        return tokens

    async def _token_request(self, provider: Mapping[str, Any], form: dict[str, str]) -> dict[str, Any]:
        import httpx

        form = {**form, "client_id": provider["client_id"]}
        if provider.get("client_secret"):
            form["client_secret"] = provider["client_secret"]
        try:
            async with httpx.AsyncClient(timeout=TOKEN_SECONDS, follow_redirects=False) as client:
                response = await client.post(provider["token_url"], data=form, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise OAuthError(code="oauth_unreachable", reason=type(exc).__name__) from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200 or not isinstance(body, dict) or not body.get("access_token"):
            reason = body.get("error") if isinstance(body, dict) else None
            raise OAuthError(code="oauth_refused", reason=str(reason or response.status_code)[:100])
        return body

    def _remember(self, member_id: str, connector: str, tokens: Mapping[str, Any]) -> None:
        lifetime = tokens.get("expires_in")
        lifetime = float(lifetime) if isinstance(lifetime, (int, float)) and lifetime > 0 else 3600.0
        self._tokens[(member_id, connector)] = (str(tokens["access_token"]), time.monotonic() + lifetime - 30)

    async def credential(self, member_id: str, record: dict[str, Any], deliver: str = "access_token") -> str:
        """What a stdio server receives in its environment: the access token, or an
        ``authorized_user`` JSON for a server that refreshes by itself (the provider's
        client id and secret with the member's refresh token; seed 001's Google
        shape). Only ever an environment value of the member's sandboxed process."""
        if deliver != "authorized_user":
            return str(await self.bearer(member_id, record))
        refresh = record.get("refresh_token")
        provider = self.providers.get(record.get("provider", ""))
        if not refresh:
            raise OAuthError(code="oauth_sign_in_first")
        if provider is None:
            raise OAuthError(code="oauth_provider_gone")
        import json

        return json.dumps({
            "type": "authorized_user",
            "client_id": provider["client_id"],
            "client_secret": provider.get("client_secret", ""),
            "refresh_token": refresh,
            "token_uri": provider["token_url"],
        })

    async def bearer(self, member_id: str, record: dict[str, Any]) -> str | None:
        """An access token for the member's OAuth connector: the one in RAM while it
        lasts, else one fetched with the refresh token from the member's file."""
        name = record.get("name", "")
        cached = self._tokens.get((member_id, name))
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        refresh = record.get("refresh_token")
        if not refresh:
            raise OAuthError(code="oauth_sign_in_first")
        provider = self.providers.get(record.get("provider", ""))
        if provider is None:
            raise OAuthError(code="oauth_provider_gone")
        tokens = await self._token_request(provider, {"grant_type": "refresh_token", "refresh_token": refresh, **({"resource": record["resource"]} if record.get("resource") else {})})
        self._remember(member_id, name, tokens)
        if tokens.get("refresh_token") and tokens["refresh_token"] != refresh:
            record["refresh_token"] = tokens["refresh_token"]  # rotated: saved by the caller's next save
            record["rotated"] = True
        return str(tokens["access_token"])
