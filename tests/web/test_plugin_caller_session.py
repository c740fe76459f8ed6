"""``current_caller().session_id`` (spec 1.19): a plugin can bind a step to the login
session that began it (the MCP connectors' OAuth ``state``, check E5). Stable for one
session, different for each session of one member and for each plugin, and neither
the token nor anything the token can be read back from."""

from __future__ import annotations

from typing import Any

from quart import Blueprint

from skald_hookspecs import PluginInfo, current_caller, hookimpl


class SessionProbe:
    def __init__(self, plugin_id: str) -> None:
        self.plugin_id = plugin_id

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=self.plugin_id, title=self.plugin_id, spec=">=1.0,<2")

    @hookimpl
    def register_routes(self, register: Any) -> None:
        blueprint = Blueprint(self.plugin_id.replace("-", "_"), __name__)

        @blueprint.get("/session")
        async def session() -> Any:
            caller = current_caller()
            assert caller is not None
            return {"session_id": caller.session_id}

        register(blueprint)


async def test_each_login_session_has_its_own_handle_per_plugin(skald):
    host = await skald.start(plugins=[SessionProbe("probe-one"), SessionProbe("probe-two")])
    await host.setup_admin()
    for plugin in ("probe-one", "probe-two"):
        await host.core.set_plugin_enabled(plugin, True)
    first = await host.member("alice")
    second = await host.member("alice")

    async def handle(client: Any, plugin: str = "probe-one") -> str:
        response = await client.get(f"/api/plugin/{plugin}/session")
        assert response.status_code == 200, response.text
        return response.json()["session_id"]

    one = await handle(first)
    assert one and one == await handle(first)  # stable for the session
    assert await handle(second) != one  # another login of the same member
    assert await handle(first, "probe-two") != one  # another plugin cannot match it up
    assert first.session_token not in one and one not in first.session_token


async def test_the_handle_outlives_a_password_change_in_the_same_session(skald):
    """A password change gives the session a new token (``rotate``) and keeps the
    session: a sign-in begun before it (an OAuth state) is still the same session's."""
    from skald_host.testing.host import MEMBER_PASSWORD

    host = await skald.start(plugins=[SessionProbe("probe-one")])
    await host.setup_admin()
    await host.core.set_plugin_enabled("probe-one", True)
    alice = await host.member("alice")
    before = (await alice.get("/api/plugin/probe-one/session")).json()["session_id"]
    changed = await alice.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": "a new long password for alice"})
    assert changed.status_code == 200, changed.text
    after = await alice.get("/api/plugin/probe-one/session")
    assert after.status_code == 200, after.text
    assert after.json()["session_id"] == before
