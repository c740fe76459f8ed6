"""Authentication and the request gate, in one place.

Deny by default: every ``/api`` route needs a live session unless its view is marked
``@public``. One ``authenticate()`` serves the cookie and the ``Authorization: Bearer``
header alike and checks that the member is still active, so no credential type can
let a deactivated member through (check C2). Cookie-authenticated writes must carry
the session's CSRF token and, when the browser sends one, a same-origin ``Origin``
(check A4); bearer requests carry no ambient credential and need neither.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Literal, TypeVar
from urllib.parse import urlsplit

from quart import current_app, g, request, websocket
from quart.wrappers import Response

from skald_hookspecs import PUBLIC_ATTRIBUTE, public  # noqa: F401 - one marker for host and plugin views
from skald_hookspecs.context import Caller, bind_caller
from skald_host.core import audit
from skald_host.core.identity.access import allowed
from skald_host.core.plugins.host_api import bind_request_credential
from skald_host.core.identity.sessions import Session
from skald_host.core.identity.users import Member, MemberNotFound
from skald_host.web.errors import ApiError

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

SECURE_COOKIE = "__Host-skald_session"
PLAIN_COOKIE = "skald_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PLUGIN_PREFIX = "/api/plugin/"


@dataclass(frozen=True)
class Principal:
    """``via="device"``: a device token a plugin issued (spec 1.3); such a principal
    reaches only that plugin's routes and has no session (``session`` is None)."""

    member: Member
    session: Session | None
    via: Literal["cookie", "bearer", "device"]
    device_id: str | None = None



def requires(action: str) -> Callable[[F], F]:
    """Gate a view on ``allowed(member, action)``; 403 otherwise."""

    def wrap(view: F) -> F:
        @functools.wraps(view)
        async def gated(*args: Any, **kwargs: Any) -> Any:
            member = current_principal().member
            if not allowed(member, action):
                audit.denied(member.id, f"action:{action}", **_where())
                raise ApiError(403, "forbidden", code="forbidden")
            return await view(*args, **kwargs)

        gated._skald_action = action  # type: ignore[attr-defined]
        return gated  # type: ignore[return-value]

    return wrap


def _where() -> dict[str, str | None]:
    """The refused request for the audit line: its route's pattern, not its path."""
    rule = request.url_rule
    return {"method": request.method, "route": rule.rule if rule is not None else None}


def current_principal() -> Principal:
    principal = g.get("principal")
    if principal is None:
        raise ApiError(401, "authentication required", code="authentication_required")
    return principal


async def reader_locale() -> str:
    """The language the signed-in member reads: their own, else the instance's."""
    member = current_principal().member
    return member.locale or await current_app.config["SKALD_CORE"].default_locale()


def _is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def transport_is_secure(req: Any) -> bool:
    """Whether Secure + ``__Host-`` cookies will work: TLS, a loopback address (which
    browsers treat as a secure context), or a configured https public URL."""
    public_url = current_app.config["SKALD_SETTINGS"].server.public_url
    if req.scheme in ("https", "wss") or urlsplit(public_url or "").scheme.lower() == "https":
        return True
    return _is_loopback(urlsplit(f"//{req.host}").hostname or "")


def cookie_name(req: Any) -> str:
    return SECURE_COOKIE if transport_is_secure(req) else PLAIN_COOKIE


def set_session_cookie(response: Response, token: str) -> None:
    secure = transport_is_secure(request)
    response.set_cookie(
        SECURE_COOKIE if secure else PLAIN_COOKIE,
        token,
        secure=secure,
        httponly=True,
        samesite="Strict",
        path="/",
    )


def clear_session_cookie(response: Response) -> None:
    for name in (SECURE_COOKIE, PLAIN_COOKIE):
        if name in request.cookies:
            response.delete_cookie(name, path="/", secure=name == SECURE_COOKIE, httponly=True, samesite="Strict")


def _credentials(req: Any) -> tuple[str | None, Literal["cookie", "bearer"]]:
    header = req.headers.get("Authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None, "bearer"
    return req.cookies.get(cookie_name(req)), "cookie"


def session_lost(req: Any) -> ApiError:
    """The 401 of a request without a live session. A token whose session an admin's
    deactivation or password reset ended is told so (``account_deactivated``,
    ``password_reset``): only its holder has it, so this tells nobody else anything."""
    token, _via = _credentials(req)
    code = current_app.config["SKALD_CORE"].auth.sessions.ended_reason(token)
    if code is not None:
        return ApiError(401, "the session was ended by an admin", code=code)
    return ApiError(401, "authentication required", code="authentication_required")


async def authenticate(req: Any) -> Principal | None:
    """The single credential check: token → live session (or, on a plugin's own
    routes, a device token that plugin issued) → active member."""
    token, via = _credentials(req)
    core = current_app.config["SKALD_CORE"]
    session = await core.auth.resolve(token)
    if session is None:
        return await _device_principal(core, req, token) if via == "bearer" else None
    try:
        member = await core.users.get(session.member_id)
    except MemberNotFound:
        member = None
    if member is None or not member.active:
        # Deactivated: its sessions end as the admin's deactivation ends them (that
        # request may not have got there yet), with the reason their holder is told.
        await core.auth.revoke_member(session.member_id, "member inactive" if member is None else "deactivated")
        return None
    return Principal(member, session, via)


async def _device_principal(core: Any, req: Any, token: str | None) -> Principal | None:
    """A device token is good for the routes of the plugin that issued it, nowhere
    else: a phone's credential cannot reach the admin API or another plugin."""
    plugin_id = _plugin_of(req.path)
    if plugin_id is None:
        return None
    credential = await core.auth.devices.resolve(plugin_id, token)
    if credential is None:
        return None
    try:
        member = await core.users.get(credential.member_id)
    except MemberNotFound:
        return None
    if not member.active:
        await core.auth.revoke_member(member.id, "member inactive")
        return None
    return Principal(member, None, "device", credential.id)


#: Origins already logged as refused, per app: one line each, and no more than this many
#: (a client sending a new Origin with every request must not fill the log).
_REFUSED_ORIGINS_LOGGED = 100


def same_origin(req: Any) -> bool:
    """True when the request carries no Origin (not a browser cross-site request) or an
    Origin naming this very host: the Host it was sent to, or ``server.public_url`` (the
    admin's own statement of where the server is, which a reverse proxy that rewrites
    Host leaves as the only match). A refusal is logged once per Origin, with both
    values compared, so a misconfigured proxy is visible, not a silent 403."""
    origin = req.headers.get("Origin")
    if origin is None:
        return True
    parts = urlsplit(origin)
    if parts.scheme in ("http", "https") and parts.netloc.lower() == req.host.lower():
        return True
    public_url = current_app.config["SKALD_SETTINGS"].server.public_url
    if public_url and origin.strip().rstrip("/").lower() == public_url.lower():
        return True
    logged = current_app.extensions.setdefault("skald_refused_origins", set())
    if origin not in logged and len(logged) < _REFUSED_ORIGINS_LOGGED:
        logged.add(origin)
        log.info(
            "refused a cross-origin %s: Origin %r is neither the Host %r nor server.public_url %r"
            " (behind a reverse proxy: pass the Host header through, or set server.public_url)",
            "websocket" if req.scheme in ("ws", "wss") else req.method, origin[:200], req.host[:200], public_url,
        )
    return False


def _view(req: Any) -> Any:
    return current_app.view_functions.get(req.endpoint) if req.endpoint else None


def _plugin_of(path: str) -> str | None:
    if not path.startswith(PLUGIN_PREFIX):
        return None
    return path[len(PLUGIN_PREFIX):].split("/", 1)[0]


async def gate_request() -> None:
    """``before_request`` for every HTTP request."""
    g.principal = None
    bind_request_credential(None)
    if not request.path.startswith("/api/"):
        return
    core = current_app.config["SKALD_CORE"]
    plugin_id = _plugin_of(request.path)
    if plugin_id is not None and not core.plugins.is_enabled(plugin_id):
        raise ApiError(404, "not found", code="not_found")  # re-read per request: disabling needs no restart
    view = _view(request)
    if view is not None and getattr(view, PUBLIC_ATTRIBUTE, False):
        if request.method not in SAFE_METHODS and not same_origin(request):
            raise ApiError(403, "cross-origin request refused", code="cross_origin")
        return
    principal = await authenticate(request)
    if principal is None:
        raise session_lost(request)
    if request.method not in SAFE_METHODS and principal.via == "cookie":
        assert principal.session is not None
        if not same_origin(request) or not principal.session.check_csrf(request.headers.get(CSRF_HEADER)):
            raise ApiError(403, "missing or wrong CSRF token", code="csrf")
    if plugin_id is not None and not core.catalog.usable(principal.member, plugin_id):
        audit.denied(principal.member.id, f"plugin:{plugin_id}", **_where())
        raise ApiError(403, "forbidden", code="forbidden")
    g.principal = principal
    if plugin_id is not None:
        bind_request_credential(plugin_id, principal.session, principal.device_id)  # HostApi.watch_caller
        member = principal.member
        bind_caller(Caller(
            member.id, member.username, member.display_name, await reader_locale(), member.is_admin,
            device_id=principal.device_id, capabilities=frozenset(member.capabilities),
            session_id=plugin_session_id(plugin_id, principal.session),
        ))


def plugin_session_id(plugin_id: str, session: Session | None) -> str | None:
    """``Caller.session_id``: the session's handle as one plugin sees it. Derived from
    the session's random ``handle`` (not the token, which a password change replaces
    mid-session) and the plugin's id, so it is stable for the session, reveals neither
    the token nor ``Session.id``, and two plugins get different handles."""
    if session is None:
        return None
    return hashlib.sha256(f"skald-plugin-session\0{plugin_id}\0{session.handle}".encode()).hexdigest()[:32]


def audit_plugin_refusal(response: Any) -> None:
    """``after_request``: a plugin route's own 403 (its admin-only page, a capability it
    checks itself) is an audit line as the host's own refusals are, so no plugin can
    forget one. The gate's refusals are written where they happen (no principal is
    bound then): one line each."""
    principal = g.get("principal")
    if response.status_code == 403 and principal is not None and request.path.startswith(PLUGIN_PREFIX):
        audit.denied(principal.member.id, f"plugin-route:{_plugin_of(request.path)}", **_where())


async def gate_websocket() -> None:
    """``before_websocket``: refuse the handshake before anything is processed when
    the Origin is foreign or the caller has no session (check A4)."""
    g.principal = None
    if not same_origin(websocket):
        raise ApiError(403, "cross-origin WebSocket refused", code="cross_origin")
    view = _view(websocket)
    if view is not None and getattr(view, PUBLIC_ATTRIBUTE, False):
        return
    principal = await authenticate(websocket)
    if principal is None or principal.session is None:
        raise session_lost(websocket)
    g.principal = principal
