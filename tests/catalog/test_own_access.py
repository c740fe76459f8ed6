"""Binding-managed plugins (``manages_own_access=True``): the plugin decides who uses it
(a pairing binding, say), so the grant lists leave it out and the grant writer refuses
it. A checkbox that controls nothing is worse than no checkbox."""

from __future__ import annotations

from .support import Routed, catalog_entry, grant_list, member_id, roster, set_enabled


async def test_a_binding_managed_plugin_is_absent_from_grant_lists_and_refused_by_the_writer(skald):
    host = await skald.start(plugins=[Routed("paired", manages_own_access=True), Routed("alpha")])
    admin = await host.admin()
    await host.member("alice")
    alice_id = await member_id(host, "alice")
    await set_enabled(admin, "paired", True)
    await set_enabled(admin, "alpha", True)

    assert set(await grant_list(admin, alice_id)) == {"alpha"}

    for plugins in (["paired"], ["alpha", "paired"]):
        refused = await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": plugins})
        assert refused.status_code == 400
        assert refused.json()["error"] == "plugin 'paired' manages its own access; it cannot be granted here"
    assert (await grant_list(admin, alice_id))["alpha"]["granted"]  # the refused write changed nothing


async def test_a_binding_managed_plugin_gets_no_rows_and_its_roster_claims_no_audience(skald):
    host = await skald.start(plugins=[Routed("paired", manages_own_access=True)])
    admin = await host.admin()
    await host.member("alice")
    await set_enabled(admin, "paired", True)  # the row's birth seeds nobody for it
    await host.member("bob")  # nor does a member's creation

    rows = await host.core.registry.run(
        lambda conn: conn.execute("SELECT count(*) FROM plugin_access WHERE plugin_id = 'paired'").fetchone()[0]
    )
    assert rows == 0
    assert await roster(admin, "paired") == {"admin": True}
    entry = await catalog_entry(admin, "paired")
    assert (entry["manages_own_access"], entry["holders"]) == (True, 0)


async def test_a_binding_managed_plugins_routes_serve_any_member_while_enabled(skald):
    host = await skald.start(plugins=[Routed("paired", manages_own_access=True)], enable=["paired"])
    admin = await host.admin()
    alice = await host.member("alice")
    kid = await host.member("kid", role="restricted")

    for client in (alice, kid, admin):
        assert (await client.get("/api/plugin/paired/ping")).status_code == 200
    assert "paired" in {p["id"] for p in (await kid.get("/api/plugins/mine")).json()["plugins"]}

    await set_enabled(admin, "paired", False)
    for client in (alice, kid, admin):
        assert (await client.get("/api/plugin/paired/ping")).status_code == 404
    assert (await host.client().get("/api/plugin/paired/ping")).status_code == 404
