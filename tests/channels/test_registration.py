"""``register_channels`` is validated like every registry: a plugin that registers a
channel under another plugin's name, or something without ``async deliver``, is
marked failed and contributes nothing; the host and the other channels go on."""

from __future__ import annotations

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo

from .support import CHANNEL, RecordingChannel


class BadChannel:
    def __init__(self, plugin_id: str, name: str, channel: object) -> None:
        self.plugin_id, self.name, self.channel = plugin_id, name, channel

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=self.plugin_id, title=self.plugin_id, spec=">=1.0,<2")

    @hookimpl
    def register_channels(self, register) -> None:
        register(self.name, self.channel)


class SyncDeliver:
    def deliver(self, member_id, event) -> None:  # not async
        pass


async def test_a_channel_under_a_foreign_name_or_without_async_deliver_fails_its_plugin_only(skald):
    impostor = BadChannel("impostor", CHANNEL, RecordingChannel())
    blocking = BadChannel("blocking", "blocking", SyncDeliver())
    host = await skald.start(plugins=[RecordingChannel(), impostor, blocking], enable=[CHANNEL])
    core = host.core
    assert set(core.channels.router.channels) == {CHANNEL}
    for plugin_id, reason in (("impostor", "named by its plugin's id"), ("blocking", "async deliver")):
        status = core.plugins.status(plugin_id)
        assert status.state == "failed" and reason in status.error, (plugin_id, status.state, status.error)
    assert (await host.client().get("/api/health")).status_code == 200
