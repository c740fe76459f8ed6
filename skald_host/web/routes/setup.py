"""First-run setup over HTTP: served only while no member exists, and only to a browser
that reached the server by an address no stranger can point at it (DNS rebinding)."""

import ipaddress
from urllib.parse import urlsplit

from quart import Blueprint, current_app, jsonify, request

from skald_host.core.identity.passwords import MIN_LENGTH, PasswordRejected
from skald_host.core.identity.setup import AlreadySetUp, initialize_instance, needs_setup
from skald_host.core.identity.users import MemberError
from skald_host.web.auth import authenticate, public, set_session_cookie
from skald_host.web.body import BOOL, TEXT, accepts, array, field, integer, json_object, obj, ref, returns, text
from skald_host.web.errors import ApiError

bp = Blueprint("setup", __name__)

#: Names that resolve only inside the network the server is in: a stranger's domain
#: cannot be one of them.
LOCAL_SUFFIXES = (".localhost", ".local", ".lan", ".home.arpa", ".internal")


def setup_host_trusted(host_header: str, public_url: str | None) -> bool:
    """Whether the first admin may be created through a request addressed to
    ``host_header``. A page on a stranger's domain can make that domain resolve to this
    server (DNS rebinding): its requests then carry its own name as Host and Origin,
    pass the same-origin check, and on a fresh install would create the first admin.
    An IP address, a single-label or local name, or the configured public URL's host
    cannot be such a domain."""
    name = (urlsplit(f"//{host_header}").hostname or "").rstrip(".").lower()
    if not name:
        return False
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    if "." not in name or name == "localhost" or name.endswith(LOCAL_SUFFIXES):
        return True
    return bool(public_url) and name == (urlsplit(public_url).hostname or "").lower()


def _host_trusted() -> bool:
    """setup_host_trusted for this request: one check for the status and the setup itself."""
    return setup_host_trusted(request.headers.get("Host", ""), current_app.config["SKALD_SETTINGS"].server.public_url)


@bp.get("/api/setup")
@returns(obj({
    "needs_setup": BOOL, "locales": array(TEXT), "signed_in": BOOL,
    "locale": text(description="the instance's language, which the sign-in page speaks ('en' before setup)"),
    "setup_allowed": {**BOOL, "description": "false: POST /api/setup refuses this request's host name (see setup_host_trusted)"},
    "password_min_length": integer(1, description="the password policy's minimum length, in characters: the forms say it before a refusal does"),
}))
@public
async def setup_status() -> dict:
    """What the first page shows: setup, sign-in, or (``signed_in``: this request
    carries a live session) the app, so a visitor's page never asks /api/auth/session
    for a 401 the browser reports as an error. ``locale``: the sign-in page is in the
    instance's language, as everything after it is for a member on the default; in the
    browser's, a German household met an English form after every restart.
    ``setup_allowed``: the page opened by a refused name says so at once, not after a
    form that cannot succeed has been filled in."""
    core = current_app.config["SKALD_CORE"]
    return {
        "needs_setup": await needs_setup(core.users),
        "setup_allowed": _host_trusted(),
        "locales": core.strings.locales,
        "locale": await core.default_locale(),
        "signed_in": await authenticate(request) is not None,
        "password_min_length": MIN_LENGTH,
    }


@bp.post("/api/setup")
@accepts(obj({"username": TEXT, "password": TEXT}, {"display_name": TEXT, "locale": TEXT, "encrypted": BOOL}))
@returns(obj({"member": ref("Member"), "csrf_token": TEXT}), 201, "set up; the first admin is logged in (cookie)")
@returns(ref("Error"), 409, "the instance is already set up")
@returns(ref("Error"), 403, "reached by a name that is not this server's own (see setup_host_trusted)")
@public
async def run_setup():
    core = current_app.config["SKALD_CORE"]
    if not _host_trusted():
        raise ApiError(
            403, "first-run setup is served only at this server's IP address, localhost, a local name or server.public_url;"
            " open it by one of those", code="setup_host_refused",
        )
    data = await json_object()
    username = field(data, "username", str)
    password = field(data, "password", str)
    try:
        member = await initialize_instance(
            core.users,
            username=username,
            password=password,
            display_name=field(data, "display_name", str, required=False, default=""),
            locale=field(data, "locale", str, required=False, default="en"),
            encrypted=field(data, "encrypted", bool, required=False, default=True),
            locales=core.strings.locales,
        )
    except AlreadySetUp:
        raise ApiError(409, "the instance is already set up", code="already_set_up") from None
    except PasswordRejected as exc:
        raise ApiError.refusing(400, exc, field="password") from None  # the form marks that field
    except MemberError as exc:
        raise ApiError.refusing(400, exc, field="username" if "username" in (exc.code or "") or exc.values.get("field") == "username" else None) from None
    result = await core.auth.login(username, password, request.remote_addr or "unknown")
    response = jsonify({"member": member.summary(core.strings, member.locale or await core.default_locale()), "csrf_token": result.session.csrf_token})
    response.status_code = 201
    set_session_cookie(response, result.token)
    return response
