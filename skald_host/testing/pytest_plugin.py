"""The ``skald`` and ``plugin_browser`` pytest fixtures (registered through the
``pytest11`` entry point)."""

from __future__ import annotations

from typing import Any, AsyncIterator

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

    @pytest_asyncio.fixture
    async def plugin_browser() -> AsyncIterator[Any]:
        """Chromium through Playwright for a plugin's page (``skald_host.testing.browser``);
        the test is skipped where Playwright or a ``chromium`` executable is missing."""
        import pytest

        from skald_host.testing.browser import PluginBrowser, chromium_executable

        playwright_api = pytest.importorskip("playwright.async_api")
        executable = chromium_executable()
        if executable is None:
            pytest.skip("no chromium on PATH")
        async with playwright_api.async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
            try:
                yield PluginBrowser(browser)
            finally:
                await browser.close()
