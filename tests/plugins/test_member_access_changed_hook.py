"""``member_access_changed`` (contract 1.15): called, and awaited, once a change that
decides a member's access is stored: an admin's change of the member (role, active
flag), of their plugin grants, or of their role's capabilities (once for each member of
the role). What the plugin asks then (``member_has_grant``, ``member_may``) already
reads the change; a plugin failing in it does not undo (or stop) the change."""

from __future__ import annotations

from skald_hookspecs import PluginInfo, hookimpl


class Watcher:
    __name__ = "watcher"

    def __init__(self, fail: bool = False) -> None:
        #: (member, has the grant, may connectors.remote) as the hook found them.
        self.seen: list[tuple[str, bool, bool]] = []
        self.fail = fail

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="watcher", title="Watcher", spec=">=1.15,<2", grant_by_default=True)

    @hookimpl
    async def member_access_changed(self, member_id: str, host) -> None:
        self.seen.append((member_id, await host.member_has_grant(member_id), await host.member_may(member_id, "connectors.remote")))
        if self.fail:
            raise RuntimeError("the plugin's own trouble")


async def _capabilities(admin, role_id: str, add: set[str] = frozenset(), remove: set[str] = frozenset()) -> None:
    roles = {r["id"]: r for r in (await admin.get("/api/admin/roles")).json()["roles"]}
    capabilities = sorted((set(roles[role_id]["capabilities"]) | set(add)) - set(remove))
    response = await admin.patch(f"/api/admin/roles/{role_id}", json={"capabilities": capabilities})
    assert response.status_code == 200, response.text


async def test_member_access_changed_follows_each_change_of_access(skald):
    plugin = Watcher()
    host = await skald.start(plugins=[plugin], enable=["watcher"])
    admin = await host.admin()
    alice = (await host.create_member("alice"))["id"]
    bob = (await host.create_member("bob"))["id"]
    await host.create_member("carol", role="restricted")
    plugin.seen.clear()

    # Plugin grants taken, then given back: the hook reads the stored change.
    assert (await admin.put(f"/api/admin/members/{alice}/plugins", json={"plugins": []})).status_code == 200
    assert plugin.seen == [(alice, False, False)]
    assert (await admin.put(f"/api/admin/members/{alice}/plugins", json={"plugins": ["watcher"]})).status_code == 200
    assert plugin.seen[1:] == [(alice, True, False)]
    plugin.seen.clear()

    # The role's capabilities: once for each member of the role (carol's is another).
    await _capabilities(admin, "member", add={"connectors.remote"})
    assert sorted(plugin.seen) == sorted([(alice, True, True), (bob, True, True)])
    plugin.seen.clear()
    await _capabilities(admin, "member", remove={"connectors.remote"})
    assert sorted(plugin.seen) == sorted([(alice, True, False), (bob, True, False)])
    plugin.seen.clear()

    # The member's role, and their active flag.
    assert (await admin.patch(f"/api/admin/members/{bob}", json={"role": "restricted"})).status_code == 200
    assert [s[0] for s in plugin.seen] == [bob]
    plugin.seen.clear()
    assert (await admin.patch(f"/api/admin/members/{alice}", json={"active": False})).status_code == 200
    assert plugin.seen == [(alice, False, False)]  # a deactivated member holds nothing


async def test_a_plugin_failing_in_member_access_changed_leaves_the_change_done(skald):
    plugin = Watcher(fail=True)
    host = await skald.start(plugins=[plugin], enable=["watcher"])
    admin = await host.admin()
    alice = (await host.create_member("alice"))["id"]
    plugin.seen.clear()
    response = await admin.put(f"/api/admin/members/{alice}/plugins", json={"plugins": []})
    assert response.status_code == 200, response.text
    assert [s[0] for s in plugin.seen] == [alice]
    assert await host.core.host_api("watcher").member_has_grant(alice) is False
    [failure] = host.core.plugins.status("watcher").failures
    assert "member_access_changed" in failure["where"], failure
