"""Fixtures of the channel tests: a real host with a recording channel plugin (defined
here, registered like any plugin through ``register_channels``), the chat probe's
tools, and a scripted model server reached through the real ``openai`` SDK."""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator

import pytest_asyncio

from skald_host.testing import RunningHost, ScriptedModelServer, SkaldClient, SkaldHarness

from tests.chat.support import ALL_MODELS, API_KEY, PROBE, ChatProbe, configure_models, write_probe_agents
from .support import CHANNEL, RecordingChannel


@dataclass
class Channels:
    host: RunningHost
    admin: SkaldClient
    server: ScriptedModelServer
    probe: ChatProbe
    channel: RecordingChannel
    skald: SkaldHarness

    async def restart(self) -> RunningHost:
        """Stop and start the host on the same data: nobody is unlocked afterwards."""
        settings = self.host.settings
        await self.host.stop()
        self.channel.api = None
        self.host = await self.skald.start(plugins=[self.probe, self.channel], settings=settings)
        self.admin = await self.host.admin()
        return self.host


@pytest_asyncio.fixture
async def channels(skald: SkaldHarness, tmp_path) -> AsyncIterator[Channels]:
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        probe = ChatProbe(write_probe_agents(tmp_path / "agents"))
        channel = RecordingChannel()
        try:
            host = await skald.start(plugins=[probe, channel], enable=[PROBE, CHANNEL])
            admin = await host.admin()
            await configure_models(admin, server)
            yield Channels(host, admin, server, probe, channel, skald)
        finally:
            await skald.close()
