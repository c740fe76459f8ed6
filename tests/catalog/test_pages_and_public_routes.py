"""What the web shell is told to show (``GET /api/plugins/pages``) and routes a plugin
marks ``@public``."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request

import skald_host.core.host
from skald_hookspecs import public
from skald_hookspecs.types import WebPage

from .support import Routed, member_id, set_enabled


def shown(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 200, response.text
    return [(p["plugin_id"], p["page_id"]) for p in response.json()["pages"]]


async def test_pages_show_admins_everything_enabled_and_members_their_granted_non_admin_pages(skald):
    plugins = [
        Routed("alpha", pages=(WebPage("main", "Alpha", "page.js", priority=20), WebPage("setup", "Alpha setup", "setup.js", admin_only=True))),
        Routed("beta", grant_by_default=False, pages=(WebPage("main", "Beta", "page.js", priority=10),)),
        Routed("gamma", pages=(WebPage("main", "Gamma", "page.js"),)),
    ]
    host = await skald.start(plugins=plugins, enable=["alpha", "beta"])
    admin = await host.admin()
    alice = await host.member("alice")

    assert shown(await admin.get("/api/plugins/pages")) == [("beta", "main"), ("alpha", "main"), ("alpha", "setup")]
    assert shown(await alice.get("/api/plugins/pages")) == [("alpha", "main")]
    page = (await alice.get("/api/plugins/pages")).json()["pages"][0]
    assert (page["entry_url"], page["route"], page["admin_only"]) == ("/api/plugin/alpha/page.js", "#plugin/alpha/main", False)

    await admin.put(f"/api/admin/members/{await member_id(host, 'alice')}/plugins", json={"plugins": ["alpha", "beta"]})
    assert shown(await alice.get("/api/plugins/pages")) == [("beta", "main"), ("alpha", "main")]

    await set_enabled(admin, "alpha", False)
    assert shown(await alice.get("/api/plugins/pages")) == [("beta", "main")]
    assert shown(await admin.get("/api/plugins/pages")) == [("beta", "main")]
    assert (await host.client().get("/api/plugins/pages")).status_code == 401


class CorePage(Routed):
    """A built-in with a page, like the host's own default pages."""

    def __init__(self) -> None:
        super().__init__("core-page", pages=(WebPage("main", "Core page", "ping"),))


async def test_built_in_pages_and_routes_serve_every_member_without_a_grant(skald, monkeypatch):
    monkeypatch.setattr(skald_host.core.host, "BUILTIN_PLUGINS", (*skald_host.core.host.BUILTIN_PLUGINS, CorePage()))
    host = await skald.start()
    admin = await host.admin()
    kid = await host.member("kid", role="restricted")

    assert host.core.plugins.status("core-page").builtin
    assert (await kid.get("/api/plugin/core-page/ping")).status_code == 200
    assert shown(await kid.get("/api/plugins/pages")) == [("core-page", "main")]
    # Built-ins are never in a grant list: there is nothing to tick.
    assert "core-page" not in {p["plugin_id"] for p in (await admin.get(f"/api/admin/members/{await member_id(host, 'kid')}/plugins")).json()["plugins"]}


# -- @public routes ------------------------------------------------------------------------


class Webhook(Routed):
    def __init__(self) -> None:
        super().__init__("hooks")
        self.received: list[Any] = []

    def add_routes(self, blueprint: Blueprint) -> None:
        @blueprint.get("/status")
        @public
        async def status() -> dict[str, Any]:
            return {"up": True}

        @public  # either decorator order works: the route decorator returns the view as is
        @blueprint.post("/incoming")
        async def incoming() -> dict[str, Any]:
            self.received.append(await request.get_json())
            return {"ok": True}


async def test_a_public_route_needs_no_session_while_enabled_and_is_404_while_disabled(skald):
    webhook = Webhook()
    host = await skald.start(plugins=[webhook], enable=["hooks"])
    admin = await host.admin()
    stranger = host.client()

    assert (await stranger.get("/api/plugin/hooks/status")).json() == {"up": True}
    assert (await stranger.post("/api/plugin/hooks/incoming", json={"n": 1})).status_code == 200
    assert webhook.received == [{"n": 1}]
    assert (await stranger.get("/api/plugin/hooks/ping")).status_code == 401  # the rest stays private

    cross_site = await stranger.post("/api/plugin/hooks/incoming", json={"n": 2}, headers={"Origin": "https://evil.example"})
    assert cross_site.status_code == 403
    assert webhook.received == [{"n": 1}]

    await set_enabled(admin, "hooks", False)
    assert (await stranger.get("/api/plugin/hooks/status")).status_code == 404
    assert (await stranger.post("/api/plugin/hooks/incoming", json={"n": 3})).status_code == 404
    assert webhook.received == [{"n": 1}]
