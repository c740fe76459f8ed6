"""``member_deleted`` (contract 1.14): called once, and awaited, when an admin deleted a
member, after the member is gone (their row and their file), with their id; a plugin
failing in it does not undo (or stop) the deletion."""

from __future__ import annotations

from skald_hookspecs import PluginInfo, hookimpl
from skald_host.testing.host import MEMBER_PASSWORD


class Bindings:
    __name__ = "bindings"

    def __init__(self, fail: bool = False) -> None:
        self.deleted: list[tuple[str, bool, bool]] = []
        self.fail = fail
        self.core = None

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="bindings", title="Bindings", spec=">=1.14,<2")

    @hookimpl
    async def member_deleted(self, member_id: str, host) -> None:
        row = await self.core.registry.run(lambda c: c.execute("SELECT id FROM users WHERE id = ?", (member_id,)).fetchone())
        self.deleted.append((member_id, row is None, self.core.users.owner_path(member_id).exists()))
        if self.fail:
            raise RuntimeError("the plugin's own trouble")


async def test_member_deleted_is_called_once_after_the_member_is_gone(skald):
    plugin = Bindings()
    host = await skald.start(plugins=[plugin], enable=["bindings"])
    plugin.core = host.core
    admin = await host.admin()
    alice = (await host.create_member("alice"))["id"]
    bob = (await host.create_member("bob"))["id"]
    response = await admin.delete(f"/api/admin/members/{alice}")
    assert response.status_code == 200, response.text
    assert plugin.deleted == [(alice, True, False)]  # before the deletion answered, the row and file gone
    assert (await admin.delete(f"/api/admin/members/{alice}")).status_code == 404
    assert plugin.deleted == [(alice, True, False)]  # once
    assert bob not in [d[0] for d in plugin.deleted]
    # And the member is no one's to ask about: no grant (not an error, as the contract says).
    assert await host.core.host_api("bindings").member_has_grant(alice) is False


async def test_a_plugin_failing_in_member_deleted_leaves_the_deletion_done(skald):
    plugin = Bindings(fail=True)
    host = await skald.start(plugins=[plugin], enable=["bindings"])
    plugin.core = host.core
    admin = await host.admin()
    alice = (await host.create_member("alice"))["id"]
    assert (await admin.delete(f"/api/admin/members/{alice}")).status_code == 200
    assert [d[0] for d in plugin.deleted] == [alice]
    assert (await host.client().login("alice", MEMBER_PASSWORD)).status_code != 200
    members = (await admin.get("/api/admin/members")).json()
    assert alice not in str(members)
    [failure] = host.core.plugins.status("bindings").failures
    assert "member_deleted" in failure["where"], failure


class SecretReader:
    """Reads the member's secret in ``member_deleted``: it cannot (the file is gone),
    and the refusal says the member is gone, not that they should log in."""

    __name__ = "secretreader"

    def __init__(self) -> None:
        self.refusals: list[Exception] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="secretreader", title="Secret reader", spec=">=1.14,<2")

    @hookimpl
    async def member_deleted(self, member_id: str, host) -> None:
        try:
            await host.member_secret_get(member_id, "token")
        except Exception as exc:
            self.refusals.append(exc)


async def test_member_data_of_a_deleted_member_is_refused_as_gone_not_as_locked(skald):
    from skald_hookspecs import MemberLocked

    plugin = SecretReader()
    host = await skald.start(plugins=[plugin], enable=["secretreader"])
    admin = await host.admin()
    alice = (await host.create_member("alice"))["id"]
    assert (await admin.delete(f"/api/admin/members/{alice}")).status_code == 200
    [refusal] = plugin.refusals
    assert isinstance(refusal, MemberLocked)  # the class the contract names for these calls
    assert refusal.code == "member_not_found" and refusal.lock_reason == ""
    assert "deleted" in str(refusal) and "log in" not in str(refusal)
    # A member who exists but is locked is still told to log in.
    bob = (await host.create_member("bob"))["id"]
    try:
        await host.core.host_api("secretreader").member_secret_get(bob, "token")
    except MemberLocked as exc:
        assert exc.code == "member_locked" and "log in" in str(exc)
    else:
        raise AssertionError("a locked member's file read")
