"""A real host with a scripted model server (reached through the ``openai`` SDK), the
admin, and models configured: what the memory tests drive over HTTP and chat."""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator

import pytest_asyncio

from chat.support import ALL_MODELS, API_KEY, configure_models
from skald_host.testing import RunningHost, ScriptedModelServer, SkaldClient, SkaldHarness


@dataclass
class MemoryHost:
    host: RunningHost
    admin: SkaldClient
    server: ScriptedModelServer

    async def restricted(self, username: str) -> SkaldClient:
        """A logged-in member of the restricted preset role."""
        created = await self.host.create_member(username)
        response = await self.admin.patch(f"/api/admin/members/{created['id']}", json={"role": "restricted"})
        assert response.status_code == 200, response.text
        return await self.host.member(username)


@pytest_asyncio.fixture
async def memhost(skald: SkaldHarness) -> AsyncIterator[MemoryHost]:
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        try:
            host = await skald.start()
            admin = await host.admin()
            await configure_models(admin, server)
            yield MemoryHost(host, admin, server)
        finally:
            await skald.close()
