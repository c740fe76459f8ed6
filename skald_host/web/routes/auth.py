"""Login, logout, the current session and password change."""

import asyncio
import logging
from typing import Any

from quart import Blueprint, current_app, jsonify, request

from skald_host.core.identity.crypto import CredentialError
from skald_host.core.identity.passwords import PasswordRejected
from skald_host.core.identity.throttle import ACCOUNT, ADDRESS, LoginThrottled, address_key
from skald_host.core.identity.users import MemberError, OwnerDatabaseUnavailable, username_key
from skald_host.web.auth import clear_session_cookie, cookie_name, current_principal, public, set_session_cookie, transport_is_secure
from skald_host.web.body import BOOL, INT, TEXT, accepts, array, field, json_object, obj, one_of, ref, returns
from skald_host.web.errors import ApiError

bp = Blueprint("auth", __name__)
log = logging.getLogger(__name__)

# Any value is accepted for the credentials: a wrong type is a failed login like any
# other, with the same status and body (check A3), never a different 400.
LOGIN = {
    "type": "object",
    "properties": {
        "username": {"description": "the user name (text; anything else fails like a wrong password)"},
        "password": {"description": "the password (text; anything else fails like a wrong password)"},
        "session": {**one_of("cookie", "bearer"), "description": "cookie (default): a session cookie; bearer: a token in the answer"},
    },
}

# One status and one body for every wrong-credential case (check A3).
INVALID_LOGIN = "invalid user name or password"

# A browser's device tokens (skald_host/core/identity/throttle.py): proof that it signed
# in to an account before, so others' failures, on the account or from its address, do
# not keep it out. Sent to the login and password routes only.
SECURE_DEVICE_COOKIE = "__Host-skald_device"
PLAIN_DEVICE_COOKIE = "skald_device"
DEVICE_COOKIE_DAYS = 365


def _device_tokens() -> str | None:
    return request.cookies.get(SECURE_DEVICE_COOKIE) or request.cookies.get(PLAIN_DEVICE_COOKIE)


def _throttled(exc: LoginThrottled) -> ApiError:
    return ApiError(429, str(exc), headers={"Retry-After": str(exc.retry_after)}, code="login_throttled", values={"seconds": exc.retry_after})


# The admin's only way to see that someone guessed, or locked an account out (a probe
# found neither in the log). Only the address, and an account's name when the typed
# name is one: people type their password into the name field, so a name that is no
# account is never written down. Never a password or a device token.
UNKNOWN_NAME = "an unknown name"


async def _account_label(core, account: str) -> str:
    member = await core.users.find(account) if account else None
    return f"account '{member.username}'" if member is not None else UNKNOWN_NAME


async def _log_failure(core, account: str, client: str, what: str) -> None:
    """One INFO line for a failed password check, then a WARNING for each limit it
    filled (``LoginThrottle.newly_throttled``: once per window, so a flood that is
    refused meanwhile writes nothing more)."""
    address = request.remote_addr or "unknown"
    label = await _account_label(core, account)
    device = " (a browser with its device token)" if client != address else ""
    log.info("%s for %s from %s%s", what, label, address, device)
    await _log_newly_throttled(core, account, client, label)


async def _log_newly_throttled(core, account: str, client: str, label: str | None = None) -> None:
    limits = core.settings.auth
    address = request.remote_addr or "unknown"
    for kind in core.auth.throttle.newly_throttled(account, client):
        if kind == ACCOUNT:
            label = label or await _account_label(core, account)
            log.warning(
                "sign-in to %s throttled: %d failed attempts within %d min from clients without its device token"
                " (last from %s)%s",
                label, limits.login_failures_per_account, limits.login_window_minutes, address,
                "" if label == UNKNOWN_NAME else "; browsers that signed in to it before are not held",
            )
        elif kind == ADDRESS:
            log.warning(  # the address as it is counted: an IPv6 one by its /64
                "sign-in from %s throttled: %d failed attempts within %d min from it",
                address_key(address), limits.login_failures_per_address, limits.login_window_minutes,
            )
        else:  # the device's own budget: only someone holding that browser's cookie
            label = label or await _account_label(core, account)
            log.warning(
                "sign-in to %s throttled for one browser holding its device token: %d failed attempts within %d min"
                " (last from %s)",
                label, limits.login_failures_per_account, limits.login_window_minutes, address,
            )


@bp.post("/api/auth/login")
@accepts(LOGIN)
@returns(obj({"member": ref("Member")}, {"csrf_token": TEXT, "token": TEXT}), 200, "logged in: a cookie, or the bearer token in `token`")
@public
async def login():
    core = current_app.config["SKALD_CORE"]
    data = await json_object()
    mode = data.get("session", "cookie")
    if mode not in ("cookie", "bearer"):
        raise ApiError(400, "'session' must be 'cookie' or 'bearer'", field="session", code="field_invalid", values={"field": "session"})
    username = data.get("username")
    account = username_key(username) if isinstance(username, str) else ""
    client = core.auth.throttle.client(account, request.remote_addr or "unknown", _device_tokens())
    # The session this browser's cookie holds, if live: the new cookie replaces it, so
    # it ends with the login (check A1: no token from before a sign-in works after it;
    # nothing could log it out once its cookie is gone). A failed login keeps it.
    replaced = await core.auth.resolve(request.cookies.get(cookie_name(request))) if mode == "cookie" else None
    try:
        result = await core.auth.login(username, data.get("password"), client, "web" if mode == "cookie" else "bearer")
    except LoginThrottled as exc:
        await _log_newly_throttled(core, account, client)  # filled by failures that were not sign-ins here
        raise _throttled(exc) from None
    except CredentialError:
        await _log_failure(core, account, client, "failed sign-in")
        raise ApiError(401, INVALID_LOGIN, code="login_failed") from None
    except OwnerDatabaseUnavailable as exc:
        raise ApiError.refusing(409, exc) from None
    body = {"member": result.member.summary(core.strings, result.member.locale or await core.default_locale())}
    if mode == "bearer":
        return {**body, "token": result.token}
    if replaced is not None:
        await core.auth.logout(replaced)  # after the new one exists: signing in again as oneself keeps the file open
    response = jsonify({**body, "csrf_token": result.session.csrf_token})
    set_session_cookie(response, result.token)
    secure = transport_is_secure(request)
    response.set_cookie(
        SECURE_DEVICE_COOKIE if secure else PLAIN_DEVICE_COOKIE,
        core.auth.throttle.remember_device(account, _device_tokens()),
        max_age=DEVICE_COOKIE_DAYS * 24 * 3600,
        secure=secure,
        httponly=True,
        samesite="Strict",
        path="/",
    )
    return response


@bp.post("/api/auth/logout")
@returns(ref("Ok"))
async def logout():
    core = current_app.config["SKALD_CORE"]
    await core.auth.logout(current_principal().session)
    response = jsonify({"ok": True})
    clear_session_cookie(response)
    return response


@bp.get("/api/auth/session")
@returns(obj({"member": ref("Member"), "capabilities": array(TEXT), "csrf_token": TEXT, "unlocked": BOOL, "locale": TEXT, "secure_transport": BOOL, "safe_mode": BOOL, "idle_seconds": INT, "ui_mode": one_of("full", "simple"), "data_recoverable": BOOL}))
async def session() -> dict:
    """The session's member and what the shell needs of it. ``idle_seconds``: how long
    the session lives without a request (``auth.session_idle_minutes``), so the page can
    warn before it ends and offer to keep it (WCAG 2.2.1); asking here, as every request
    does, starts that time again. ``ui_mode``: the interface the member's role asks for
    (``simple``: the shell offers Chat and My account only; an admin's is always full).
    ``safe_mode``: the server runs in safe mode (``Skald.safe_mode``), so the shell says
    above every page that the member's scheduled prompts are paused.
    ``data_recoverable``: an admin's reset set the member's data aside with what opens it
    again (``skald recover-reset``); a reset made before that was kept cannot be undone."""
    principal = current_principal()
    core = current_app.config["SKALD_CORE"]
    locale = principal.member.locale or await core.default_locale()
    recoverable = bool(principal.member.data_reset_at) and bool(await asyncio.to_thread(core.users.quarantined_resets, principal.member.id))
    return {
        "member": principal.member.summary(core.strings, locale),
        "capabilities": sorted(principal.member.capabilities) if not principal.member.is_admin else ["*"],
        "csrf_token": principal.session.csrf_token if principal.via == "cookie" else None,
        "unlocked": core.users.is_unlocked(principal.member.id),
        "locale": locale,
        "secure_transport": transport_is_secure(request),
        "safe_mode": core.safe_mode,
        "idle_seconds": int(core.auth.sessions.idle_seconds),
        "ui_mode": principal.member.ui_mode,
        "data_recoverable": recoverable,
    }


@bp.post("/api/auth/password")
@accepts(obj({"current_password": TEXT, "new_password": TEXT}))
@returns(obj({"ok": BOOL}, {"token": TEXT}), 200, "changed: this session's new cookie, or for a bearer session its new token in `token`")
async def change_password() -> Any:
    """The member changes their own password: the same DEK is re-wrapped, every other
    session of theirs ends, and this one stays under a new token (a new cookie, or the
    bearer's ``token``): a copy of the old one, perhaps why the password changes, opens
    nothing after.

    A wrong current password is a failed login of the account (the same limits, the
    same 429), and a throttled account is refused before any Argon2 work: a session
    must not be a way to guess the password without limit. From a browser holding
    the account's device token (the session's own, signed in there) it counts against
    that device's budget instead, as its sign-ins do: a lockout others' failures built
    up does not keep the member from changing their password there."""
    core = current_app.config["SKALD_CORE"]
    data = await json_object()
    current = field(data, "current_password", str)
    new = field(data, "new_password", str)
    principal = current_principal()
    throttle = core.auth.throttle
    account = username_key(principal.member.username)
    client = throttle.client(account, request.remote_addr or "unknown", _device_tokens())
    try:
        attempt = await throttle.admit(account, client)
    except LoginThrottled as exc:
        await _log_newly_throttled(core, account, client)
        raise _throttled(exc) from None
    try:
        token = await core.auth.change_password(principal.session, current, new)
    except CredentialError:
        attempt.failed()
        await _log_failure(core, account, client, "wrong current password in a password change")
        raise ApiError(403, "the current password is wrong", field="current_password", code="current_password_wrong") from None
    except PasswordRejected as exc:
        raise ApiError.refusing(400, exc, field="new_password") from None  # the form marks that field
    except MemberError as exc:
        raise ApiError.refusing(400, exc) from None
    finally:
        attempt.release()  # a right current password clears nothing: no success counted
    if principal.via == "bearer":
        return {"ok": True, "token": token}
    response = jsonify({"ok": True})
    if token is not None:
        set_session_cookie(response, token)
    return response
