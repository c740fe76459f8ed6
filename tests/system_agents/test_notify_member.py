"""HostApi.notify_member (contract 1.3): background work tells a member something on
the open web page (their bus) and on their home channel; never someone without access."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from skald_hookspecs import ChannelEvent, PluginInfo, hookimpl


class Capture:
    __name__ = "capture"

    def __init__(self, *, own_access: bool) -> None:
        self.own_access = own_access
        self.delivered: list[tuple[str, ChannelEvent]] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="capture", title="Capture", spec=">=1.3,<2", manages_own_access=self.own_access, grant_by_default=False)

    @hookimpl
    def register_channels(self, register: Callable[..., Any]) -> None:
        register("capture", self)

    async def deliver(self, member_id: str, event: ChannelEvent) -> None:
        self.delivered.append((member_id, event))


async def test_a_notification_reaches_the_web_and_the_home_channel(skald):
    capture = Capture(own_access=True)
    host = await skald.start(plugins=[capture], enable=["capture"], settings=skald.settings(system_agents={"run": False}))
    alice_id = (await host.member("alice")).member["id"]
    await host.core.channels.router.set_home_source(await host.core.users.get(alice_id), "capture")
    subscription = host.core.buses.members.subscribe(alice_id)
    try:
        assert await host.core.host_api("capture").notify_member(alice_id, "Your build failed.") is True
        event = await asyncio.wait_for(anext(aiter(subscription)), 5)
    finally:
        subscription.close()
    assert (event.kind, event.data) == ("notification", {"text": "Your build failed."})
    assert [(m, e.kind, e.conversation_id, e.text) for m, e in capture.delivered] == [(alice_id, "notification", None, "Your build failed.")]
    assert await host.core.host_api("capture").notify_member("0" * 32, "nobody") is False


async def test_a_plugin_without_the_members_grant_cannot_notify_them(skald):
    capture = Capture(own_access=False)
    host = await skald.start(plugins=[capture], enable=["capture"], settings=skald.settings(system_agents={"run": False}))
    alice_id = (await host.member("alice")).member["id"]
    assert await host.core.host_api("capture").notify_member(alice_id, "hello") is False
    assert capture.delivered == []
