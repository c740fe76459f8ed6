"""One JSON error shape for the whole API:
``{"error": "<what was wrong, in English>", "code": "<stable code>"}``, plus ``values``
(what the code's text is filled with) and ``field`` (the offending input) when there are.

A client shows the string ``core.error.<code>`` of ``/api/i18n`` in its reader's
language, filled with ``values``, and falls back to ``error`` when it has no such string:
a refusal nobody gave a code yet answers ``http_<status>``, which has none.

Internal errors answer a generic 500 and the traceback goes to the log only (check
F4: no tracebacks to clients). The default handler is registered last, so a plugin's
blueprint may handle its own errors first.
"""

from __future__ import annotations

import functools
import html
import inspect
import logging
import uuid
from typing import Any, Callable

from quart import Quart, Response, current_app, jsonify, request
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as WerkzeugResponse

from skald_host.core.plugins.failures import record_failure, withheld_traceback
from skald_host.core.storage import DiskFailure, DiskFull, disk_failure

PLUGIN_ROUTES = "/api/plugin/"

log = logging.getLogger(__name__)


class ApiError(Exception):
    """``field`` names the offending input field when there is one, so a form can put
    the message beside it without parsing text; ``code`` and ``values`` let a client say
    it in its reader's language (see the module docstring)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        field: str | None = None,
        code: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.field = field
        self.code = code
        self.values = values or {}

    @classmethod
    def refusing(cls, status: int, exc: Exception, *, field: str | None = None, headers: dict[str, str] | None = None) -> "ApiError":
        """The answer to a core refusal: its message, and its code and values when it has them.
        The field is the caller's, else the refusal's own (an attribute, or the ``field``
        its message names: the form marks that field, not only its status line)."""
        code, values, known = getattr(exc, "code", None), getattr(exc, "values", None), getattr(exc, "field", None)
        if known is None and isinstance(values, dict):
            known = values.get("field")
        return cls(
            status, str(exc), headers=headers, field=field if field is not None else known if isinstance(known, str) else None,
            code=code if isinstance(code, str) else None, values=values if isinstance(values, dict) else None,
        )


def unknown_fields(names: Any) -> ApiError:
    """The refusal of a body with fields a route does not take, naming them."""
    listed = ", ".join(sorted(str(name) for name in names))
    return ApiError(400, f"unknown field(s): {listed}", field=min(names, key=str), code="fields_unknown", values={"fields": listed})


def error_response(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    field: str | None = None,
    *,
    code: str | None = None,
    values: dict[str, Any] | None = None,
) -> Any:
    body: dict[str, Any] = {"error": message, "code": code or f"http_{status}"}
    if values:
        body["values"] = values
    if field is not None:
        body["field"] = field
    response = jsonify(body)
    response.status_code = status
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


_GENERIC = {
    400: "bad request",
    401: "authentication required",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    413: "request body too large",
    415: "unsupported media type",
    429: "too many requests",
}
#: The codes of the generic answers, so a client can say them in its own language.
GENERIC_CODES = {status: message.replace(" ", "_") for status, message in _GENERIC.items()}

#: When a client may try a write the disk refused again (check G4).
STORAGE_RETRY_SECONDS = 30


def storage_failure_response(failure: DiskFailure) -> Any:
    """507 for a full disk, 503 with Retry-After for a failing one; the operator's
    detail (which file) goes to the log, not to the client."""
    log.error("storage failure on %s %s: %s", request.method, request.path, failure)
    if isinstance(failure, DiskFull):
        return error_response(507, failure.member_text, code=failure.code)
    return error_response(503, failure.member_text, {"Retry-After": str(STORAGE_RETRY_SECONDS)}, code=failure.code)


def install_error_handlers(app: Quart) -> None:
    @app.errorhandler(ApiError)
    async def api_error(exc: ApiError) -> Any:
        return error_response(exc.status, exc.message, exc.headers, exc.field, code=exc.code, values=exc.values)

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException) -> Any:
        status = exc.code or 500
        if status == 404 and "SKALD_CORE" in current_app.config and _is_page_navigation():
            return await _not_found_page()
        return error_response(status, _GENERIC.get(status, "request failed"), code=GENERIC_CODES.get(status))

    @app.errorhandler(DiskFailure)
    async def storage_error(exc: DiskFailure) -> Any:
        return storage_failure_response(exc)

    @app.errorhandler(Exception)
    async def internal_error(exc: Exception) -> Any:
        failure = disk_failure(exc, "a file") if isinstance(exc, OSError) else None  # an upload's write, say
        if failure is not None:
            return storage_failure_response(failure)
        # Under an error id, frames and type only: the message may quote what a member
        # sent (privacy: nothing a member writes reaches a log line). A plugin's route
        # failing is listed on that plugin's page, as its tools' failures are.
        plugin_id = _plugin_of(request.path)
        where = f"route {request.method} {request.path}"
        if plugin_id is not None:  # what the host found wrong with the route's answer is said whole: the host's words
            error_id = record_failure(current_app.config["SKALD_CORE"].plugins, plugin_id, where, exc, say=isinstance(exc, UnsendableAnswer))
        else:
            error_id = uuid.uuid4().hex[:12]
            log.error("unhandled error on %s, error id %s\n%s", where.removeprefix("route "), error_id, withheld_traceback(exc))
        return error_response(500, "internal error", code="internal_error", values={"error_id": error_id})


def answered_in_view(view: Callable[..., Any]) -> Callable[..., Any]:
    """A plugin's view whose return value becomes a response inside the view: a value
    Quart cannot send (``return 12345``, a dict holding a set) otherwise failed in
    Quart's ``make_response``, after the view and outside every error handler, as a bare
    ``http_500`` with no error id, on no plugin's page, and logged with the exception's
    whole message. Failing here, it is a failure of the route, as a route that raises.
    The view's own attributes (its ``@accepts``, read by the gate and the upload limit)
    stay readable on the wrapper."""

    @functools.wraps(view)
    async def answered(*args: Any, **kwargs: Any) -> Any:
        value = await current_app.ensure_async(view)(*args, **kwargs)
        try:
            return await current_app.make_response(value)
        except Exception as exc:
            # Quart's words (or JSON's) on the value: the plugin's page said only
            # "TypeError (message withheld ...)", though no member's data was in it.
            # Said in the host's words, with types only, and where the view is.
            raise UnsendableAnswer(_unsendable(value, exc), view) from None

    return answered


class UnsendableAnswer(TypeError):
    """A plugin's route returned what cannot be made into a response: the host's words,
    shown whole on the plugin's page (no member's data: types only)."""

    def __init__(self, reason: str, view: Callable[..., Any]) -> None:
        from skald_host.core.plugins.manager import definition_of

        defined = definition_of(view)
        super().__init__(f"{reason}{f'; the view is at {defined}' if defined else ''}")


#: What Quart makes a response of (``Quart.make_response``).
ROUTE_ANSWERS = "a Response, str, bytes, dict, list, a generator, or a tuple (body, status), (body, headers) or (body, status, headers)"


def _unsendable(value: Any, exc: Exception) -> str:
    """Why ``value``, a view's return value, could not be made into a response."""
    if isinstance(value, tuple) and len(value) not in (2, 3):
        return f"the route returned a tuple of {len(value)} items; a route returns {ROUTE_ANSWERS}"
    body = value[0] if isinstance(value, tuple) else value
    if isinstance(body, (dict, list)):
        return (f"the route returned a {type(body).__name__} that cannot be encoded as JSON ({type(exc).__name__});"
                " every key and value must be JSON (str, int, float, bool, None, list, dict)")
    sendable = isinstance(body, (str, bytes, bytearray, Response, WerkzeugResponse, HTTPException)) or inspect.isgenerator(body) or inspect.isasyncgen(body)
    if not sendable:
        kind = "None" if body is None else type(body).__name__
        return f"the route returned {kind}{' in its tuple' if isinstance(value, tuple) else ''}; a route returns {ROUTE_ANSWERS}"
    return f"the route's return value could not be made into a response ({type(exc).__name__}): check the status and headers it returns"


def _is_page_navigation() -> bool:
    """A person typed or followed an address (a mistyped ``/einstellungen``): they get a
    page to read, with a way home. The API, and any script that does not ask for HTML
    first (``fetch`` sends ``*/*``), keeps the JSON answer it parses."""
    return (
        request.method in ("GET", "HEAD")
        and not request.path.startswith("/api/")
        and request.accept_mimetypes.best_match(["application/json", "text/html"]) == "text/html"
    )


async def _page_locale(core: Any) -> str:
    """The language the shell would speak to this reader: the signed-in member's (theirs,
    else the instance's), else the browser's first one the host has, else the instance's.
    No gate ran for a path outside ``/api/``, so the session is looked up here."""
    from skald_host.web.auth import authenticate  # auth.py imports this module

    principal = await authenticate(request)
    if principal is not None:
        return principal.member.locale or await core.default_locale()
    return request.accept_languages.best_match(core.strings.locales) or await core.default_locale()


# Languages written right to left (web/lib/i18n.js keeps the same list for the app).
_RIGHT_TO_LEFT = frozenset({"ar", "he", "iw", "fa", "ur", "ps", "yi", "ji", "dv", "ckb", "sd", "ug"})


def text_direction(locale: str) -> str:
    """``"rtl"`` for a language written right to left (``ar``, ``he-IL``), else ``"ltr"``:
    a page's ``<html dir>``, so the stylesheet's logical properties mirror it."""
    return "rtl" if locale.replace("_", "-").split("-")[0].lower() in _RIGHT_TO_LEFT else "ltr"


async def _not_found_page() -> Any:
    """404 as a small page in the app's stylesheet (the sign-in screen's card), in the
    reader's language, with a link to the start page; words from the core bundle's
    ``not_found_page.*``. Only text goes in, escaped."""
    core = current_app.config["SKALD_CORE"]
    locale = await _page_locale(core)

    def say(key: str) -> str:
        return html.escape(core.strings.translate(f"core.{key}", locale))

    page = f"""<!doctype html>
<html lang="{html.escape(locale)}" dir="{text_direction(locale)}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{say("not_found_page.title")} · {say("app.name")}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/ui/app.css">
</head>
<body>
<main class="auth-screen">
<div class="card auth-card">
<p class="brand-mark">{say("app.name")}</p>
<h1>{say("not_found_page.title")}</h1>
<p class="intro">{say("not_found_page.text")}</p>
<p><a class="btn primary" href="/">{say("not_found_page.home")}</a></p>
</div>
</main>
</body>
</html>
"""
    return Response(page, status=404, content_type="text/html; charset=utf-8")


def _plugin_of(path: str) -> str | None:
    """The plugin whose router serves ``path`` (``/api/plugin/<id>/...``), if any."""
    if not path.startswith(PLUGIN_ROUTES):
        return None
    plugin_id = path[len(PLUGIN_ROUTES):].split("/", 1)[0]
    core = current_app.config.get("SKALD_CORE")
    return plugin_id if core is not None and core.plugins.status(plugin_id) is not None else None
