"""``member_locking`` (contract 1.2): called once, when a member's file that was open
is about to close; never for a member whose file is already closed, however many
times the host locks them on the way (a deletion and a data-losing reset lock a
member the admin's request already locked)."""

from __future__ import annotations

from skald_hookspecs import PluginInfo, hookimpl

NEW_PASSWORD = "a password the admin chose 42"


class Watcher:
    __name__ = "watcher"

    def __init__(self) -> None:
        self.locking: list[tuple[str, bool]] = []
        self.core = None

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="watcher", title="Watcher", spec=">=1.2,<2")

    @hookimpl
    async def member_locking(self, member_id: str) -> None:
        self.locking.append((member_id, self.core.users.is_unlocked(member_id)))


async def test_member_locking_fires_once_and_only_while_the_file_is_open(skald):
    plugin = Watcher()
    host = await skald.start(plugins=[plugin], enable=["watcher"])
    plugin.core = host.core
    admin = await host.admin()
    await host.member("alice")
    await host.member("bob")
    await host.create_member("carol")  # never logged in: her file is closed
    alice = (await host.core.users.find("alice")).id
    bob = (await host.core.users.find("bob")).id
    carol = (await host.core.users.find("carol")).id
    assert host.core.users.is_unlocked(alice) and host.core.users.is_unlocked(bob)

    assert (await admin.delete(f"/api/admin/members/{alice}")).status_code == 200
    assert plugin.locking == [(alice, True)]  # once, with the file still open

    response = await admin.post(f"/api/admin/members/{bob}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": True})
    assert response.status_code == 200, response.text
    assert plugin.locking == [(alice, True), (bob, True)]

    # A closed file is not "about to close": locking it again, or a member never
    # unlocked, tells the plugin nothing.
    await host.core.users.lock(bob)
    await host.core.users.lock(carol)
    assert (await admin.delete(f"/api/admin/members/{carol}")).status_code == 200
    assert plugin.locking == [(alice, True), (bob, True)]
