"""Fixtures of the HTTP security tests."""

from __future__ import annotations

from typing import AsyncIterator

import pytest_asyncio

from skald_host.testing import ScriptedModelServer
from web_support import MODEL, sweep_responder


@pytest_asyncio.fixture
async def model_server() -> AsyncIterator[ScriptedModelServer]:
    """The model the sweeps' chat objects talk to (see ``web_support.sweep_responder``)."""
    async with ScriptedModelServer(models=(MODEL,), responder=sweep_responder) as server:
        yield server
