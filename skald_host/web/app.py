"""``create_app(settings)``: the Quart application around one headless core.

Nothing happens at import: the plugin manager and the core are built here and started
in ``before_serving``, stopped in ``after_serving`` (sessions revoked, owner files
closed). Tests call this with exactly the plugins they want.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from quart import Quart, request

from skald_host.core.host import Skald, build_plugin_manager
from skald_host.core.plugins.manager import PluginManager
from skald_host.settings import Settings
from skald_host.web.auth import gate_request, gate_websocket
from skald_host.web.errors import install_error_handlers
from skald_host.web.routes import BLUEPRINTS

log = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parents[2] / "web"

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


def create_app(settings: Settings, *, plugins: PluginManager | None = None, web_dir: Path | None = None) -> Quart:
    app = Quart("skald_host")
    app.config.update(
        SKALD_SETTINGS=settings,
        SKALD_WEB_DIR=web_dir or WEB_DIR,
        MAX_CONTENT_LENGTH=settings.server.max_body_bytes,
        BODY_TIMEOUT=30,
        PROVIDE_AUTOMATIC_OPTIONS=True,
        JSON_SORT_KEYS=False,
    )
    manager = plugins or build_plugin_manager(settings)

    install_error_handlers(app)
    app.before_request(gate_request)
    app.before_websocket(gate_websocket)
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)

    @app.before_serving
    async def start_core() -> None:
        app.config["SKALD_CORE"] = await Skald.start(settings, manager)

    @app.after_serving
    async def stop_core() -> None:
        core = app.config.pop("SKALD_CORE", None)
        if core is not None:
            await core.stop()

    @app.after_request
    async def security_headers(response: Any) -> Any:
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        response.headers.setdefault("X-Frame-Options", "DENY")
        if request.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    return app
