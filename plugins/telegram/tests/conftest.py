"""Fixtures of the Telegram plugin's tests: the Bot API stand-in, the scripted model, and
a real host that finds the plugin through its installed entry point."""

from __future__ import annotations

import importlib.metadata
from typing import AsyncIterator

import pytest
import pytest_asyncio

from skald_host.testing import ScriptedModelServer, SkaldHarness
from telegram_standin import BotApiStandIn
from telegram_support import API_KEY, MODEL, PROBE, NoteProbe, Setup, configure_model


@pytest.fixture(scope="session", autouse=True)
def installed() -> None:
    found = [ep for ep in importlib.metadata.entry_points(group="skald.plugins") if ep.name == "telegram"]
    if not found:
        pytest.skip("skald-telegram is not installed (pip install -e plugins/telegram)")


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
