"""The plugin's HTTP routes. The host mounts the blueprint at ``/api/plugin/hello/``
behind its gate: a session is required (unless a view is ``@public``), the plugin must
be enabled (404 otherwise, re-checked per request) and the caller must hold a grant for
it (403 otherwise). By the time a handler runs, all of that has been checked."""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from quart import Blueprint, Response

from skald_hello import PLUGIN_ID, compose_greeting, running
from skald_hookspecs import current_caller


def build_blueprint() -> Blueprint:
    """A fresh blueprint per host: Quart refuses new routes on a blueprint that was
    already registered, and each test starts its own host."""
    blueprint = Blueprint(PLUGIN_ID, __name__)
    page_js = files("skald_hello").joinpath("page.js").read_text(encoding="utf-8")

    @blueprint.get("/greeting")
    async def greeting() -> Any:
        member = current_caller()  # the gate has checked session, enabled flag and grant
        assert member is not None
        host = running.host
        if host is None:  # routes are mounted at boot, so a handler must tolerate this
            return {"error": "hello is not running"}, 503
        config = await host.get_config()
        mine = await host.get_user_config(member.id)
        return {
            "greeting": compose_greeting(
                config,
                mine,
                name=member.display_name or member.username,
                default=host.translate("hello.greeting", member.locale),
            ),
            # The page's own words: it holds keys, never English of its own. The
            # nickname's label is the one the member's settings form shows.
            "strings": {
                "nickname": host.translate("hello.user_config.nickname.label", member.locale),
                "save": host.translate("hello.save", member.locale),
            },
            # Reading a secret is fine; sending it to a browser never is.
            "token_configured": bool(config.get("api_token")),
        }

    @blueprint.get("/page.js")
    async def page() -> Response:
        # An ES module must come with a JavaScript type: the host sends
        # X-Content-Type-Options: nosniff, and browsers refuse anything else.
        return Response(page_js, mimetype="text/javascript")

    return blueprint
