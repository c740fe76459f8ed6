"""Login, logout, the current session and password change."""

from quart import Blueprint, current_app, jsonify, request

from skald_host.core.identity.crypto import CredentialError
from skald_host.core.identity.passwords import PasswordRejected
from skald_host.core.identity.throttle import LoginThrottled
from skald_host.core.identity.users import MemberError, OwnerDatabaseUnavailable
from skald_host.web.auth import clear_session_cookie, current_principal, public, set_session_cookie, transport_is_secure
from skald_host.web.body import BOOL, TEXT, accepts, array, field, json_object, obj, one_of, ref, returns
from skald_host.web.errors import ApiError

bp = Blueprint("auth", __name__)

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


@bp.post("/api/auth/login")
@accepts(LOGIN)
@returns(obj({"member": ref("Member")}, {"csrf_token": TEXT, "token": TEXT}), 200, "logged in: a cookie, or the bearer token in `token`")
@public
async def login():
    core = current_app.config["SKALD_CORE"]
    data = await json_object()
    mode = data.get("session", "cookie")
    if mode not in ("cookie", "bearer"):
        raise ApiError(400, "'session' must be 'cookie' or 'bearer'")
    try:
        result = await core.auth.login(
            data.get("username"), data.get("password"), request.remote_addr or "unknown", "web" if mode == "cookie" else "bearer"
        )
    except LoginThrottled as exc:
        raise ApiError(429, "too many failed logins; try again later", headers={"Retry-After": str(exc.retry_after)}, code="login_throttled", values={"seconds": exc.retry_after}) from None
    except CredentialError:
        raise ApiError(401, INVALID_LOGIN, code="login_failed") from None
    except OwnerDatabaseUnavailable as exc:
        raise ApiError.refusing(409, exc) from None
    body = {"member": result.member.summary()}
    if mode == "bearer":
        return {**body, "token": result.token}
    response = jsonify({**body, "csrf_token": result.session.csrf_token})
    set_session_cookie(response, result.token)
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
@returns(obj({"member": ref("Member"), "capabilities": array(TEXT), "csrf_token": TEXT, "unlocked": BOOL, "locale": TEXT, "secure_transport": BOOL}))
async def session() -> dict:
    principal = current_principal()
    core = current_app.config["SKALD_CORE"]
    return {
        "member": principal.member.summary(),
        "capabilities": sorted(principal.member.capabilities) if not principal.member.is_admin else ["*"],
        "csrf_token": principal.session.csrf_token if principal.via == "cookie" else None,
        "unlocked": core.users.is_unlocked(principal.member.id),
        "locale": principal.member.locale or await core.default_locale(),
        "secure_transport": transport_is_secure(request),
    }


@bp.post("/api/auth/password")
@accepts(obj({"current_password": TEXT, "new_password": TEXT}))
@returns(ref("Ok"))
async def change_password() -> dict:
    """The member changes their own password: the same DEK is re-wrapped, every other
    session of theirs ends, this one stays."""
    core = current_app.config["SKALD_CORE"]
    data = await json_object()
    current = field(data, "current_password", str)
    new = field(data, "new_password", str)
    try:
        await core.auth.change_password(current_principal().session, current, new)
    except CredentialError:
        raise ApiError(403, "the current password is wrong", field="current_password", code="current_password_wrong") from None
    except (PasswordRejected, MemberError) as exc:
        raise ApiError.refusing(400, exc) from None
    return {"ok": True}
