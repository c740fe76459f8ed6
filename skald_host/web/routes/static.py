"""The browser UI: static ES modules from ``web/``, no build step."""

from pathlib import Path

from quart import Blueprint, current_app, send_from_directory

from skald_host.web.auth import public

bp = Blueprint("static_ui", __name__)


def _web_dir() -> Path:
    return current_app.config["SKALD_WEB_DIR"]


async def _send(filename: str):
    """The file, which the browser asks about again on every load (``no-cache``: a
    304 when it is unchanged, by its ETag or date). Cached for hours, an upgraded
    server's page ran yesterday's modules, some beside today's (upgrade probe); the
    addresses stay the same from one version to the next."""
    response = await send_from_directory(_web_dir(), filename)
    response.headers["Cache-Control"] = "no-cache"
    return response


@bp.get("/")
@public
async def index():
    return await _send("index.html")


@bp.get("/ui/<path:filename>")
@public
async def asset(filename: str):
    """``send_from_directory`` refuses paths that escape the folder."""
    return await _send(filename)
