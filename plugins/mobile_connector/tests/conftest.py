"""Fixtures of the mobile connector's tests: a real host that finds the plugin through its
installed entry point, the scripted model, and a probe plugin with tools that need
approval or notify the member."""

from __future__ import annotations

import importlib.metadata
from typing import AsyncIterator

import pytest
import pytest_asyncio

from skald_host.testing import SkaldHarness
from mobile_support import Setup, mobile_host


@pytest.fixture(scope="session", autouse=True)
def installed() -> None:
    found = [ep for ep in importlib.metadata.entry_points(group="skald.plugins") if ep.name == "mobile-connector"]
    if not found:
        pytest.skip("skald-mobile-connector is not installed (pip install -e plugins/mobile_connector)")


@pytest_asyncio.fixture
async def setup(skald: SkaldHarness) -> AsyncIterator[Setup]:
    async with mobile_host(skald) as started:
        yield started
