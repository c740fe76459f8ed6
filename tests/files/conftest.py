"""Fixtures of the files tests: a real host on 127.0.0.1 with a scripted model server
reached through the ``openai`` SDK, and two members (alice, bob) logged in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator

import pytest_asyncio

from skald_host.testing import RunningHost, ScriptedModelServer, SkaldClient, SkaldHarness
from tests.chat.support import API_KEY

VISION, PLAIN = "vision-model", "plain-model"


@dataclass
class Files:
    host: RunningHost
    admin: SkaldClient
    server: ScriptedModelServer
    alice: SkaldClient
    bob: SkaldClient

    @property
    def core(self):
        return self.host.core

    async def member(self, username: str):
        member = await self.core.users.find(username)
        assert member is not None
        return member


@pytest_asyncio.fixture
async def files(skald: SkaldHarness) -> AsyncIterator[Files]:
    async with ScriptedModelServer(models=(VISION, PLAIN), api_key=API_KEY) as server:
        try:
            settings = skald.settings(files={"upload_max_bytes": 256 * 1024})
            host = await skald.start(settings=settings)
            admin = await host.admin()
            yield Files(host, admin, server, await host.member("alice"), await host.member("bob"))
        finally:
            await skald.close()
