"""The browser UI: static ES modules from ``web/``, no build step."""

from pathlib import Path

from quart import Blueprint, current_app, send_from_directory

from skald_host.web.auth import public

bp = Blueprint("static_ui", __name__)


def _web_dir() -> Path:
    return current_app.config["SKALD_WEB_DIR"]


@bp.get("/")
@public
async def index():
    return await send_from_directory(_web_dir(), "index.html")


@bp.get("/ui/<path:filename>")
@public
async def asset(filename: str):
    """``send_from_directory`` refuses paths that escape the folder."""
    return await send_from_directory(_web_dir(), filename)
