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
