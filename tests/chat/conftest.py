"""Fixtures of the chat end-to-end tests: a real host with the ``ChatProbe`` plugin
enabled, a scripted model server it reaches through the ``openai`` SDK, and the admin."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from durability.helpers import Servers
from skald_host.core.agent.store import ConversationStore
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.testing import RunningHost, ScriptedModelServer, SkaldClient, SkaldHarness

from .support import ALL_MODELS, API_KEY, MODEL_A, PROBE, ChatProbe, write_probe_agents


@dataclass
class Chat:
    host: RunningHost
    admin: SkaldClient
    server: ScriptedModelServer
    probe: ChatProbe


@pytest_asyncio.fixture
async def owner_store(tmp_path) -> AsyncIterator[ConversationStore]:
    """The conversations of one member's file, encrypted and with its reader, as the host
    opens it, without a host around it (``owner_store.db`` is the file)."""
    db = await Database.open(tmp_path / "owner.db", key=os.urandom(32), migrations=OWNER_MIGRATIONS, create=True, reader=True)
    try:
        yield ConversationStore(db)
    finally:
        await db.close()


@pytest.fixture
def chat_settings() -> dict[str, dict[str, Any]]:
    """Settings sections the host of ``chat`` starts with; a test overrides it with
    ``@pytest.mark.parametrize("chat_settings", [{"subagents": {...}}])``."""
    return {}


@pytest_asyncio.fixture
async def chat(skald: SkaldHarness, tmp_path, chat_settings) -> AsyncIterator[Chat]:
    """The model server outlives the host: the host is stopped first, so no turn of
    it is left talking to a closed server."""
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        probe = ChatProbe(write_probe_agents(tmp_path / "agents"))
        try:
            host = await skald.start(plugins=[probe], enable=[PROBE], settings=skald.settings(**chat_settings) if chat_settings else None)
            yield Chat(host, await host.admin(), server, probe)
        finally:
            await skald.close()


# The crash tests: the server is a real subprocess (``skald serve``) they kill, and the
# scripted model runs in the test process, so what it was sent across both lives of the
# server is counted from outside the process that died.


@pytest_asyncio.fixture
async def model() -> AsyncIterator[ScriptedModelServer]:
    async with ScriptedModelServer(models=(MODEL_A,), api_key=API_KEY) as server:
        yield server


@pytest_asyncio.fixture
async def servers(tmp_path, monkeypatch) -> AsyncIterator[Servers]:
    """``skald serve`` subprocesses on ``tmp_path / "data"``, reaching the model server
    directly; every one still running at teardown is SIGKILLed."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    factory = Servers(tmp_path)
    try:
        yield factory
    finally:
        await factory.close()
