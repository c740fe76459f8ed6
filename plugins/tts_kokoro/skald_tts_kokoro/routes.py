"""The plugin's own router (``/api/plugin/tts_kokoro/``): the voice page's script. The
page itself talks to the host's ``/api/tts`` routes, which cover every engine."""

from __future__ import annotations

from importlib.resources import files

from quart import Blueprint, Response

from skald_hookspecs import HostApi


def build_blueprint(host: HostApi) -> Blueprint:
    blueprint = Blueprint("tts_kokoro", __name__)
    script = files("skald_tts_kokoro").joinpath("page.js").read_text(encoding="utf-8")

    @blueprint.get("/page.js")
    async def page_js() -> Response:
        return Response(script, mimetype="text/javascript")

    return blueprint
