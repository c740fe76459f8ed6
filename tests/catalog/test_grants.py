"""Who may use a plugin (seed 001 "Default access", "Plugin visibility").

Grants are rows in ``plugin_access``: deny by default, and the default is materialised
at exactly two moments: when a plugin's registry row is born (its first toggle or first
configuration) for members of ``auto_grant`` roles, and when a member is created, for
every plugin with ``grant_by_default``. Never on re-enable, never on a role change.
Admins hold everything implicitly. Every answer here comes from the real gate in front
of ``/api/plugin/<id>/``.
"""

from __future__ import annotations

import asyncio

import pytest

from .support import Routed, grant_list, granted, member_id, roster, set_enabled


async def test_members_created_before_the_row_is_born_are_granted_at_the_first_enable(skald):
    host = await skald.start(plugins=[Routed("alpha")])
    admin = await host.admin()
    alice = await host.member("alice")
    kid = await host.member("kid", role="restricted")
    alice_id, kid_id = await member_id(host, "alice"), await member_id(host, "kid")

    # Loaded but never toggled: no registry row, so nobody holds it yet.
    assert not await granted(admin, alice_id, "alpha")
    assert await roster(admin, "alpha") == {"admin": True}

    await set_enabled(admin, "alpha", True)  # the row is born: auto_grant roles receive it

    assert await granted(admin, alice_id, "alpha")
    assert not await granted(admin, kid_id, "alpha")  # "restricted" has auto_grant off
    assert await roster(admin, "alpha") == {"admin": True, "alice": False}
    assert (await alice.get("/api/plugin/alpha/ping")).json() == {"plugin": "alpha", "member_id": alice_id}
    assert (await kid.get("/api/plugin/alpha/ping")).status_code == 403


async def test_members_created_after_the_row_is_born_are_granted_at_creation(skald):
    host = await skald.start(plugins=[Routed("alpha")], enable=["alpha"])
    admin = await host.admin()

    bob = await host.member("bob")
    kid = await host.member("kid", role="restricted")

    assert await granted(admin, await member_id(host, "bob"), "alpha")
    assert not await granted(admin, await member_id(host, "kid"), "alpha")
    assert (await bob.get("/api/plugin/alpha/ping")).status_code == 200
    assert (await kid.get("/api/plugin/alpha/ping")).status_code == 403


async def test_a_member_of_a_new_role_follows_that_roles_auto_grant(skald):
    host = await skald.start(plugins=[Routed("alpha")], enable=["alpha"])
    admin = await host.admin()
    for role_id, auto_grant in (("guests", False), ("staff", True)):
        created = await admin.post("/api/admin/roles", json={"id": role_id, "label": role_id.title(), "attrs": {"auto_grant": auto_grant}})
        assert created.status_code == 201, created.text

    guest = await host.member("guest", role="guests")
    staff = await host.member("staff", role="staff")

    assert (await guest.get("/api/plugin/alpha/ping")).status_code == 403
    assert (await staff.get("/api/plugin/alpha/ping")).status_code == 200


async def test_a_plugin_with_grant_by_default_off_is_seeded_to_nobody(skald):
    host = await skald.start(plugins=[Routed("quiet", grant_by_default=False)])
    admin = await host.admin()
    alice = await host.member("alice")
    alice_id = await member_id(host, "alice")

    await set_enabled(admin, "quiet", True)
    bob = await host.member("bob")

    assert await roster(admin, "quiet") == {"admin": True}
    assert (await alice.get("/api/plugin/quiet/ping")).status_code == 403
    assert (await bob.get("/api/plugin/quiet/ping")).status_code == 403

    # The admin's one write path still grants it by hand.
    replaced = await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": ["quiet"]})
    assert replaced.status_code == 200, replaced.text
    assert (await alice.get("/api/plugin/quiet/ping")).status_code == 200


async def test_configuring_a_never_toggled_plugin_is_its_rows_birth(skald):
    host = await skald.start(plugins=[Routed("alpha")])
    admin = await host.admin()
    await host.member("alice")
    alice_id = await member_id(host, "alice")

    configured = await admin.put("/api/admin/plugins/alpha/config", json={"config": {}})
    assert configured.status_code == 200, configured.text

    assert await granted(admin, alice_id, "alpha")
    assert not host.core.plugins.is_enabled("alpha")  # born disabled: configuring enables nothing


async def test_re_enabling_never_resurrects_a_grant_the_admin_removed(skald):
    host = await skald.start(plugins=[Routed("alpha"), Routed("beta")])
    admin = await host.admin()
    alice = await host.member("alice")
    alice_id = await member_id(host, "alice")
    await set_enabled(admin, "alpha", True)
    await set_enabled(admin, "beta", True)

    removed = await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": ["beta"]})
    assert removed.status_code == 200, removed.text
    assert (await alice.get("/api/plugin/alpha/ping")).status_code == 403

    await set_enabled(admin, "alpha", False)
    await set_enabled(admin, "alpha", True)
    await admin.put("/api/admin/plugins/alpha/config", json={"config": {}})  # an edit is no birth either
    await host.member("bob")  # nor is another member's creation

    assert {k: v["granted"] for k, v in (await grant_list(admin, alice_id)).items()} == {"alpha": False, "beta": True}
    assert (await alice.get("/api/plugin/alpha/ping")).status_code == 403
    assert (await alice.get("/api/plugin/beta/ping")).status_code == 200


async def test_a_role_change_neither_seeds_nor_revokes(skald):
    host = await skald.start(plugins=[Routed("alpha")], enable=["alpha"])
    admin = await host.admin()
    kid = await host.member("kid", role="restricted")
    alice = await host.member("alice")
    kid_id, alice_id = await member_id(host, "kid"), await member_id(host, "alice")

    promoted = await admin.patch(f"/api/admin/members/{kid_id}", json={"role": "member"})
    demoted = await admin.patch(f"/api/admin/members/{alice_id}", json={"role": "restricted"})
    assert (promoted.status_code, demoted.status_code) == (200, 200), (promoted.text, demoted.text)

    assert not await granted(admin, kid_id, "alpha")  # promotion: the admin ticks the box
    assert await granted(admin, alice_id, "alpha")  # demotion: nothing revoked as a side effect
    assert (await kid.get("/api/plugin/alpha/ping")).status_code == 403
    assert (await alice.get("/api/plugin/alpha/ping")).status_code == 200


async def test_admins_hold_every_plugin_implicitly_and_cannot_be_granted_one(skald):
    host = await skald.start(plugins=[Routed("quiet", grant_by_default=False)], enable=["quiet"])
    admin = await host.admin()
    admin_id = admin.member["id"]

    assert (await admin.get("/api/plugin/quiet/ping")).status_code == 200
    assert await roster(admin, "quiet") == {"admin": True}  # listed as implicit
    assert (await grant_list(admin, admin_id))["quiet"] == {
        "plugin_id": "quiet",
        "title": "Quiet",
        "enabled": True,
        "granted": True,
        "implicit": True,
    }

    refused = await admin.put(f"/api/admin/members/{admin_id}/plugins", json={"plugins": ["quiet"]})
    assert refused.status_code == 400
    assert refused.json()["error"] == "admins hold every plugin implicitly"
    rows = await host.core.registry.run(
        lambda conn: conn.execute("SELECT count(*) FROM plugin_access WHERE user_id = ?", (admin_id,)).fetchone()[0]
    )
    assert rows == 0  # no rows for admins: they would only be noise in every roster


async def test_a_revoked_grant_lands_on_the_next_request_with_nothing_pushed(skald):
    host = await skald.start(plugins=[Routed("alpha")], enable=["alpha"])
    admin = await host.admin()
    alice = await host.member("alice")
    alice_id = await member_id(host, "alice")
    assert (await alice.get("/api/plugin/alpha/ping")).status_code == 200

    member_events = host.core.buses.members.subscribe(alice_id)
    system_events = host.core.buses.system.subscribe()
    try:
        revoked = await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": []})
        assert revoked.status_code == 200, revoked.text

        # Same session, next request: refused. Nothing went over a bus to make it so: the
        # member's bus carries only the announcement for their open pages (they read
        # their session again), the system bus nothing.
        assert (await alice.get("/api/plugin/alpha/ping")).status_code == 403
        assert not await host.core.host_api("alpha").member_has_grant(alice_id)
        assert [e.kind for e in member_events.drain()] == ["access_changed"]
        for subscription in (member_events, system_events):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(subscription.get(), 0.1)
    finally:
        member_events.close()
        system_events.close()

    regranted = await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": ["alpha"]})
    assert regranted.status_code == 200
    assert (await alice.get("/api/plugin/alpha/ping")).status_code == 200


async def test_a_grant_write_naming_an_unknown_plugin_changes_nothing(skald):
    host = await skald.start(plugins=[Routed("alpha")], enable=["alpha"])
    admin = await host.admin()
    await host.member("alice")
    alice_id = await member_id(host, "alice")

    refused = await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": ["ghost"]})
    assert refused.status_code == 400
    assert "ghost" in refused.json()["error"]
    assert await granted(admin, alice_id, "alpha")
    assert (await admin.put("/api/admin/members/nobody/plugins", json={"plugins": []})).status_code == 404
