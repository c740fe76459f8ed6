"""The ``skald`` pytest fixture (registered through the ``pytest11`` entry point)."""

from __future__ import annotations

from typing import AsyncIterator

try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the kit needs the test extras
    pytest_asyncio = None

if pytest_asyncio is not None:
    from skald_host.testing.host import SkaldHarness

    @pytest_asyncio.fixture
    async def skald(tmp_path) -> AsyncIterator[SkaldHarness]:
        """Start real hosts with exactly the plugins you name; all stopped afterwards."""
        harness = SkaldHarness(tmp_path)
        try:
            yield harness
        finally:
            await harness.close()
