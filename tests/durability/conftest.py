"""Fixtures of the durability tests (checks B1-B3, B5, G1, G5)."""

from __future__ import annotations

from typing import AsyncIterator

import pytest_asyncio

from .helpers import Servers


@pytest_asyncio.fixture
async def servers(tmp_path) -> AsyncIterator[Servers]:
    """Start ``skald serve`` subprocesses on ``tmp_path / "data"``; every one still
    running at teardown is SIGKILLed."""
    factory = Servers(tmp_path)
    try:
        yield factory
    finally:
        await factory.close()
