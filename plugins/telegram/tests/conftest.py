"""Fixtures of the Telegram plugin's tests: the Bot API stand-in, the scripted model, and
a real host that finds the plugin through its installed entry point."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from skald_hookspecs import PluginInfo, Tool, hookimpl
from skald_host.testing import RunningHost, ScriptedModelServer, SkaldClient, SkaldHarness
from telegram_standin import TOKEN, BotApiStandIn

MODEL = "model-telegram"
API_KEY = "sk-scripted-telegram-tests"
PROBE = "tgprobe"


class NoteProbe:
    """A tool with a side effect, so the seeded catch-all rule asks for approval."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=PROBE, title="Telegram test probe", spec=">=1.0,<2")

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def run(args: Any, ctx: Any) -> str:
            self.notes.append(str(args.get("text")))
            return f"wrote {args.get('text')!r}"

        register(Tool("write_note", "Write a note.", {"type": "object", "properties": {"text": {"type": "string"}}}, run))


@dataclass
class Setup:
    host: RunningHost
    admin: SkaldClient
    api: BotApiStandIn
    model: ScriptedModelServer
    probe: NoteProbe
    harness: SkaldHarness

    async def configure(self, **config: Any) -> dict[str, Any]:
        body = {"bot_token": TOKEN, "api_base_url": self.api.url, "poll_timeout_seconds": 1, **config}
        response = await self.admin.put("/api/admin/plugins/telegram/config", json={"config": body})
        assert response.status_code == 200, response.text
        return response.json()

    async def enable(self, enabled: bool = True) -> Any:
        response = await self.admin.put("/api/admin/plugins/telegram/enabled", json={"enabled": enabled})
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture(scope="session", autouse=True)
def installed() -> None:
    found = [ep for ep in importlib.metadata.entry_points(group="skald.plugins") if ep.name == "telegram"]
    if not found:
        pytest.skip("skald-telegram is not installed (pip install -e plugins/telegram)")


async def configure_model(admin: SkaldClient, server: ScriptedModelServer) -> None:
    response = await admin.post("/api/admin/models/providers", json={"name": "scripted", "base_url": server.base_url, "api_key": API_KEY})
    assert response.status_code == 201, response.text
    body = {"provider_id": response.json()["id"], "model": MODEL, "priority": 1, "strength": 60}
    response = await admin.post("/api/admin/models/entries", json=body)
    assert response.status_code == 201, response.text


@pytest_asyncio.fixture
async def setup(skald: SkaldHarness) -> AsyncIterator[Setup]:
    """A host (telegram found through its entry point, not yet configured or enabled),
    the stand-in and the scripted model. The host stops first, so no turn of it is left
    talking to a closed server."""
    async with ScriptedModelServer(models=(MODEL,), api_key=API_KEY) as model, BotApiStandIn() as api:
        probe = NoteProbe()
        try:
            host = await skald.start(plugins=[probe], use_entry_points=True, enable=[PROBE])
            admin = await host.admin()
            await configure_model(admin, model)
            yield Setup(host, admin, api, model, probe, skald)
        finally:
            await skald.close()
