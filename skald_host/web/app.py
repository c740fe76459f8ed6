"""``create_app(settings)``: the Quart application around one headless core.

Nothing happens at import: the plugin manager and the core are built here and started
in ``before_serving``, stopped in ``after_serving`` (sessions revoked, owner files
closed). Tests call this with exactly the plugins they want.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from quart import Blueprint, Quart, request
from werkzeug.exceptions import RequestEntityTooLarge

from skald_host.control import start_control_socket, stop_control_socket
from skald_host.core.host import Skald, StartupError, build_plugin_manager, settle_heap
from skald_host.core.plugins.manager import PluginError, PluginManager, StrictPluginFailure
from skald_host.settings import Settings
from skald_host.web.auth import PLUGIN_PREFIX, audit_plugin_refusal, gate_request, gate_websocket
from skald_host.web.body import JSONProvider, json_error_request_class, read_body, settle_unread_body
from skald_host.web.errors import GENERIC_CODES, answered_in_view, error_response, install_error_handlers
from skald_host.web.routes import BLUEPRINTS
from skald_host.web.routes.files import PluginUploads, plugin_upload_refusal, refuse_oversized_plugin_upload
from skald_host.web.routes.files import request_class as upload_request_class

log = logging.getLogger(__name__)

# The repository's web/, shipped inside the package (skald_host/_shipped/web is a link to it).
WEB_DIR = (Path(__file__).resolve().parents[1] / "_shipped" / "web").resolve()

# Check E3/F1: no inline script, images only from ourselves and data: URLs.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    )
)


def create_app(
    settings: Settings, *, plugins: PluginManager | None = None, web_dir: Path | None = None, control_socket: bool = False
) -> Quart:
    """``control_socket``: also listen on ``<data dir>/control.sock`` (``skald serve``)."""
    app = Quart("skald_host")
    # A path's doubled slash is part of what was asked (a note named "/etc/passwd" is
    # ``notes//etc/passwd``): answered by the route, with the API's JSON 400, not
    # redirected as an HTML 308 to another name a client may then follow.
    app.url_map.merge_slashes = False
    app.config.update(
        SKALD_SETTINGS=settings,
        SKALD_WEB_DIR=web_dir or WEB_DIR,
        MAX_CONTENT_LENGTH=settings.server.max_body_bytes,
        BODY_TIMEOUT=settings.server.body_timeout_seconds,
        PROVIDE_AUTOMATIC_OPTIONS=True,
        JSON_SORT_KEYS=False,
    )
    # Which plugin routes are file uploads is known once their blueprints are mounted.
    app.extensions["skald_plugin_uploads"] = plugin_uploads = PluginUploads()
    app.request_class = json_error_request_class(upload_request_class(settings.files.upload_max_bytes, plugin_uploads))
    app.json = JSONProvider(app)  # one JSON reader and writer: no NaN in or out (skald_host/web/body.py)
    manager = plugins or build_plugin_manager(settings)

    install_error_handlers(app)

    @app.errorhandler(RequestEntityTooLarge)
    async def body_too_large(exc: RequestEntityTooLarge) -> Any:
        refusal = plugin_upload_refusal()
        if refusal is not None:  # a plugin's file upload cut at the upload limit
            return await app.handle_user_exception(refusal)
        return error_response(413, "request body too large", code=GENERIC_CODES[413])

    app.before_request(gate_request)
    app.before_request(refuse_oversized_plugin_upload)  # after the gate, as the host's upload views check it
    app.before_request(read_body)  # after the gate: nothing of a refused request's body is read
    app.after_request(settle_unread_body)  # ... but a small one is dropped after the answer: the connection stays
    app.before_websocket(gate_websocket)
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)

    quart_log_exception = app.log_exception

    def log_exception(exc_info: Any) -> None:
        # A refused start is one line (strict mode's plugin, hook and place; a data dir
        # that cannot open), said by whoever started the server (``StartupError``), not
        # pages of the server's own traceback.
        if not isinstance(exc_info[1], (StrictPluginFailure, StartupError)):
            quart_log_exception(exc_info)

    app.log_exception = log_exception  # type: ignore[method-assign]

    @app.before_serving
    async def start_core() -> None:
        try:
            core = await Skald.start(settings, manager, start_plugins=False)
        except (StrictPluginFailure, StartupError) as exc:
            app.config["SKALD_STARTUP_ERROR"] = exc
            raise
        except OSError as exc:
            # instance.key unreadable, database/ another user's (or a file): one line
            # naming the path, not three stacked tracebacks of the lifespan.
            refused = StartupError(
                f"cannot use {exc.filename or settings.data_dir}: {exc.strerror or exc}"
                f" (check that the data dir {settings.data_dir} and everything in it belong to the user"
                " running Skald, which must be able to read and write them)"
            )
            app.config["SKALD_STARTUP_ERROR"] = refused
            raise refused from None
        app.config["SKALD_CORE"] = core
        await mount_plugin_routes(app, core)
        await core.catalog.report_missing()  # enabled, then uninstalled: said at every start until dismissed
        try:
            await core.start_enabled_plugins()
        except StrictPluginFailure as exc:
            app.config["SKALD_STARTUP_ERROR"] = exc
            await app.config.pop("SKALD_CORE").stop()
            raise
        core.backups.start_schedule()
        core.start_system_agents()
        if control_socket:
            app.config["SKALD_CONTROL"] = await start_control_socket(core)
        settle_heap()
        app.config["SKALD_READY"] = True

    @app.after_serving
    async def stop_core() -> None:
        control = app.config.pop("SKALD_CONTROL", None)
        core = app.config.pop("SKALD_CORE", None)
        if control is not None:
            stop_control_socket(control, core)
        if core is not None:
            await core.stop()

    @app.after_request
    async def security_headers(response: Any) -> Any:
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("X-Frame-Options", "DENY")
        if request.path.startswith(PLUGIN_PREFIX):
            response.headers["Cache-Control"] = "no-cache"
            audit_plugin_refusal(response)
        elif request.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    return app


def _validate_blueprint(plugin_id: str, args: tuple[Any, ...]) -> Blueprint:
    if len(args) != 1 or not isinstance(args[0], Blueprint):
        raise PluginError("register() expects one Quart Blueprint")
    return args[0]


def _mount_checked(app: Quart, blueprint: Blueprint, plugin_id: str) -> str | None:
    """Mount ``blueprint`` at ``/api/plugin/<id>/`` unless one of its rules is refused:
    then none of them is added, and the refusal is returned. The rules are known only
    once the blueprint registers (its routes are deferred until then), so the app's
    ``add_url_rule`` is held back while it does, and replayed when every rule passed."""
    prefix = f"{PLUGIN_PREFIX}{plugin_id}"
    held: list[tuple[Any, ...]] = []
    app.add_url_rule = lambda rule, *args, **options: held.append((rule, args, options))  # type: ignore[method-assign]
    try:
        app.register_blueprint(blueprint, url_prefix=prefix, name=f"plugin.{plugin_id}")
    finally:
        del app.add_url_rule  # the class's own again
    for rule, _args, _options in held:
        problem = _route_problem(rule.removeprefix(prefix))
        if problem:
            return (
                f"the route {rule.removeprefix(prefix)!r} {problem}; a route is a plain path below the plugin's own"
                f" prefix ({prefix}/…), which the host sets (a Blueprint's url_prefix is replaced)"
            )
    for rule, args, options in held:
        app.add_url_rule(rule, *args, **options)
    return None


#: ``%2e`` (a dot), ``%2f`` (a slash), ``%5c`` (a backslash): a rule holding one is
#: matched only by a path a client sends encoded, which the path it stands for is not.
_ENCODED_SEPARATOR = re.compile(r"%(2e|2f|5c)", re.IGNORECASE)


def _route_problem(rule: str) -> str | None:
    """Why a plugin's route rule may not be mounted, or None. A rule with a ``..``
    segment (``/../../auth/session``) was mounted and listed in the OpenAPI document
    as ``/api/plugin/<id>/../../auth/session``: a path a browser normalises into the
    host's own route, answered by the plugin for a client that sends it as is. Page
    entries are refused the same way (``catalog.validate_web_page``)."""
    if "\\" in rule:
        return "contains a backslash"
    if _ENCODED_SEPARATOR.search(rule):
        return "contains an encoded dot, slash or backslash"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in rule):
        return "contains a control character"
    if any(segment in (".", "..") for segment in rule.split("/")):
        return "has a '.' or '..' segment"
    return None


async def mount_plugin_routes(app: Quart, core: Skald) -> None:
    """Mount every loaded plugin's blueprint at ``/api/plugin/<id>/`` — enabled or
    not: the gate in ``gate_request`` answers 404 while a plugin is disabled, so
    enabling and disabling need no restart. A blueprint that fails to mount marks
    its plugin failed; the others mount."""
    routers = await core.plugins.collect(
        "register_routes", _validate_blueprint, kind="router", extra=lambda plugin_id: {"host": core.host_api(plugin_id)}
    )
    for contribution in routers:
        try:
            refusal = _mount_checked(app, contribution.value, contribution.plugin_id)
        except Exception as exc:
            core.plugins.fail(contribution.plugin_id, f"register_routes: the blueprint could not be mounted: {exc}")
        else:
            if refusal is not None:
                core.plugins.fail(contribution.plugin_id, f"register_routes: {refusal}")
    # A plugin's HTTP views make their response themselves (``answered_in_view``); a
    # websocket's view returns nothing to send.
    mounted = tuple(f"plugin.{c.plugin_id}." for c in routers)
    for endpoint in {rule.endpoint for rule in app.url_map.iter_rules() if rule.endpoint.startswith(mounted) and not rule.websocket}:
        app.view_functions[endpoint] = answered_in_view(app.view_functions[endpoint])
    app.extensions["skald_plugin_uploads"].mount(app)
