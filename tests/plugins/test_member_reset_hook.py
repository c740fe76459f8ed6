"""``member_reset`` (contract 1.7): called, and awaited, when an admin's reset set an
encrypted member's data aside, before the reset answers; not for a reset that keeps
the data; a plugin failing in it does not undo the reset."""

from __future__ import annotations

from skald_hookspecs import PluginInfo, hookimpl

NEW_PASSWORD = "a password the admin chose 42"


class Bindings:
    __name__ = "bindings"

    def __init__(self, fail: bool = False) -> None:
        self.reset: list[str] = []
        self.fail = fail

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="bindings", title="Bindings", spec=">=1.7,<2")

    @hookimpl
    async def member_reset(self, member_id: str, host) -> None:
        self.reset.append(member_id)
        if self.fail:
            raise RuntimeError("the plugin's own trouble")


async def reset(admin, member_id: str):
    return await admin.post(f"/api/admin/members/{member_id}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": True})


async def test_member_reset_is_awaited_for_a_data_losing_reset_only(skald):
    plugin = Bindings()
    host = await skald.start(plugins=[plugin], enable=["bindings"])
    admin = await host.admin()
    alice = (await host.create_member("alice"))["id"]
    plain = (await host.create_member("plain", encrypted=False))["id"]
    response = await reset(admin, alice)
    assert response.status_code == 200 and response.json()["data_lost"] is True
    assert plugin.reset == [alice]  # before the reset answered
    response = await reset(admin, plain)
    assert response.status_code == 200 and response.json()["data_lost"] is False
    assert plugin.reset == [alice]


async def test_a_plugin_failing_in_member_reset_leaves_the_reset_done(skald):
    plugin = Bindings(fail=True)
    host = await skald.start(plugins=[plugin], enable=["bindings"])
    admin = await host.admin()
    alice = (await host.create_member("alice"))["id"]
    assert (await reset(admin, alice)).status_code == 200
    assert (await host.client().login("alice", NEW_PASSWORD)).status_code == 200
    [failure] = host.core.plugins.status("bindings").failures
    assert failure["where"] == "member_reset" or "member_reset" in failure["where"], failure


async def test_a_plugin_off_at_the_reset_is_told_once_when_it_next_starts(skald):
    """A plugin disabled while an account changed hands kept its link to the old holder
    (a Telegram chat) and, enabled again, sent the account's replies there. It is told
    when it starts, once: a restart does not tell it again."""
    plugin = Bindings()
    host = await skald.start(plugins=[plugin], enable=["bindings"])
    admin = await host.admin()
    alice = (await host.create_member("alice"))["id"]
    await host.core.set_plugin_enabled("bindings", False)
    assert (await reset(admin, alice)).status_code == 200
    assert plugin.reset == []
    await host.core.set_plugin_enabled("bindings", True)
    assert plugin.reset == [alice]
    settings = host.settings
    await host.stop()
    await skald.start(plugins=[plugin], settings=settings)
    assert plugin.reset == [alice]


async def test_a_reset_from_the_command_line_reaches_the_plugins_at_the_next_start(skald):
    """``skald reset-password`` runs with the server stopped and no plugin started: what
    the plugins bound to the account is dropped when the server starts again."""
    from skald_host.core.host import Skald, build_plugin_manager

    plugin = Bindings()
    host = await skald.start(plugins=[plugin], enable=["bindings"])
    alice = (await host.create_member("alice"))["id"]
    settings = host.settings
    await host.stop()
    core = await Skald.start(settings, build_plugin_manager(settings, extra=(plugin,), use_entry_points=False), start_plugins=False)  # as the CLI does
    try:
        await core.administration.reset_password(alice, NEW_PASSWORD, set_by_admin=True)
    finally:
        await core.stop()
    assert plugin.reset == []
    await skald.start(plugins=[plugin], settings=settings)
    assert plugin.reset == [alice]
