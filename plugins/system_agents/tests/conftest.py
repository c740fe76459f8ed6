"""Fixtures of the system agents' tests: a real host with the plugin, a channel that
records what reaches a member's home source, and the scheduler's clock in the test's
hand (its loop is off: each test drives the passes)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

import pytest_asyncio

import skald_system_agents
from skald_hookspecs import ChannelEvent, PluginInfo, hookimpl

UTC = dt.timezone.utc


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime.now(UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


class CaptureChannel:
    """A channel plugin that keeps what it is handed (a stand-in for Telegram or the
    mobile app, which deliver the same events)."""

    __name__ = "capture"

    def __init__(self) -> None:
        self.delivered: list[tuple[str, ChannelEvent]] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="capture", title="Capture", spec=">=1.3,<2", manages_own_access=True)

    @hookimpl
    def register_channels(self, register: Callable[..., Any]) -> None:
        register("capture", self)

    async def deliver(self, member_id: str, event: ChannelEvent) -> None:
        self.delivered.append((member_id, event))

    def notifications(self, member_id: str) -> list[str]:
        return [e.text for m, e in self.delivered if m == member_id and e.kind == "notification"]


class Setup:
    def __init__(self, skald: Any, host: Any, clock: Clock, channel: CaptureChannel, settings: Any) -> None:
        self.skald, self.host, self.clock, self.channel, self.settings = skald, host, clock, channel, settings

    @property
    def core(self) -> Any:
        return self.host.core

    async def tick(self) -> list[Any]:
        return await self.core.system_agents.tick()

    async def restart(self) -> None:
        await self.host.stop()
        self.host = await self.skald.start(
            plugins=[skald_system_agents, self.channel], enable=["system_agents", "capture"], settings=self.settings
        )
        self.core.system_agents.clock = self.clock


@pytest_asyncio.fixture
async def setup(skald: Any) -> Setup:
    settings = skald.settings(system_agents={"run": False, "time_zone": "Europe/Berlin"})
    channel = CaptureChannel()
    host = await skald.start(plugins=[skald_system_agents, channel], enable=["system_agents", "capture"], settings=settings)
    clock = Clock()
    host.core.system_agents.clock = clock
    return Setup(skald, host, clock, channel, settings)
