"""Fixtures of the connectors plugin's tests: the scripted model, a real host that finds
the plugin through its installed entry point, and real MCP servers (demo_server.py)."""

from __future__ import annotations

import importlib.metadata
from typing import AsyncIterator

import pytest
import pytest_asyncio

from mcp_support import API_KEY, MODEL, Setup, configure_model
from skald_host.testing import ScriptedModelServer, SkaldHarness


@pytest.fixture(scope="session", autouse=True)
def installed() -> None:
    found = [ep for ep in importlib.metadata.entry_points(group="skald.plugins") if ep.name == "mcp"]
    if not found:
        pytest.skip("skald-mcp is not installed (pip install -e plugins/mcp_connectors)")


@pytest_asyncio.fixture
async def setup(skald: SkaldHarness) -> AsyncIterator[Setup]:
    """A host with the plugin enabled, the admin, and the scripted model. The host stops
    first, so no turn of it is left talking to a closed server."""
    async with ScriptedModelServer(models=(MODEL,), api_key=API_KEY) as model:
        try:
            host = await skald.start(use_entry_points=True, enable=["mcp"])
            admin = await host.admin()
            await configure_model(admin, model)
            yield Setup(host, admin, model, skald)
        finally:
            await skald.close()
