"""``enabled`` in the admin's plugin list and detail is what the admin chose, also for a
plugin that failed to load: its ``state`` says it failed. The choice is kept in its row
and applies again once the plugin loads; it used to read ``false`` for such a plugin,
which then came back enabled after the fix and a restart."""

from __future__ import annotations

from skald_hookspecs import hookimpl

from .support import Routed, catalog_entry


class RoutesExplode(Routed):
    @hookimpl
    def register_routes(self, register) -> None:
        raise RuntimeError("routes exploded")


async def test_a_plugin_enabled_then_failing_to_load_reads_enabled_and_failed(skald):
    host = await skald.start(plugins=[Routed("flaky")], enable=["flaky"])
    await host.stop()

    # The same plugin, broken by an update: it fails to load at the next start.
    host = await skald.start(plugins=[RoutesExplode("flaky"), RoutesExplode("never")])
    admin = await host.admin()
    flaky, never = await catalog_entry(admin, "flaky"), await catalog_entry(admin, "never")
    assert (flaky["state"], flaky["enabled"], flaky["healthy"]) == ("failed", True, False)
    assert (never["state"], never["enabled"]) == ("failed", False)  # never enabled: off
    detail = (await admin.get("/api/admin/plugins/flaky")).json()
    assert (detail["state"], detail["enabled"]) == ("failed", True)
    assert (await admin.get("/api/admin/plugins/never")).json()["enabled"] is False
    assert (await admin.get("/api/plugin/flaky/ping")).status_code == 404  # it does not run for all that
    assert not host.core.plugins.is_enabled("flaky")
    await host.stop()

    # Fixed and restarted: enabled, as the list said.
    host = await skald.start(plugins=[Routed("flaky")])
    admin = await host.admin()
    flaky = await catalog_entry(admin, "flaky")
    assert (flaky["state"], flaky["enabled"], flaky["healthy"]) == ("loaded", True, True)
    assert (await admin.get("/api/plugin/flaky/ping")).status_code == 200


#: Blocked by its name, before it says its id: an extra plugin's name is its class's (a
#: distribution's, its entry point's), so the class is named as the plugin's id is.
Banned = type("banned", (Routed,), {})


async def test_an_enabled_plugin_that_failed_to_load_or_is_blocked_can_be_switched_off(skald):
    """Off was refused with 409 "fix it and restart the server to enable it", so the
    admin could not turn off a plugin that was on and broken (or blocked), as a missing
    one can be; on stays refused, as nothing could run it."""
    host = await skald.start(plugins=[Routed("flaky"), Banned("banned")], enable=["flaky", "banned"])
    await host.stop()

    host = await skald.start(plugins=[RoutesExplode("flaky"), Banned("banned")], settings=skald.settings(plugins={"block": ["banned"]}))
    admin = await host.admin()
    for plugin_id, state in (("flaky", "failed"), ("banned", "blocked")):
        assert ((await catalog_entry(admin, plugin_id))["state"], (await catalog_entry(admin, plugin_id))["enabled"]) == (state, True)
        off = await admin.put(f"/api/admin/plugins/{plugin_id}/enabled", json={"enabled": False})
        assert off.status_code == 200, off.text
        assert (off.json()["state"], off.json()["enabled"]) == (state, False)
        assert (await catalog_entry(admin, plugin_id))["enabled"] is False
        refused = await admin.put(f"/api/admin/plugins/{plugin_id}/enabled", json={"enabled": True})
        assert (refused.status_code, refused.json()["code"]) == (409, f"plugin_{state}")
    await host.stop()

    # Fixed (and unblocked) and restarted: off, as the admin left it.
    host = await skald.start(plugins=[Routed("flaky"), Banned("banned")])
    admin = await host.admin()
    for plugin_id in ("flaky", "banned"):
        entry = await catalog_entry(admin, plugin_id)
        assert (entry["state"], entry["enabled"]) == ("disabled", False)
        assert (await admin.get(f"/api/plugin/{plugin_id}/ping")).status_code == 404
