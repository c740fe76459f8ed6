"""Browser tests: Playwright's async API driving Debian's chromium against a real
host started by the ``skald`` fixture in the same event loop.

Every page opened through ``browser_pages`` is watched: JavaScript dialogs (an
``alert`` from injected markup would be one), uncaught errors and CSP violations
reported on the console fail the test at teardown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from .kit import CHROMIUM, CHROMIUM_ARGS, DESKTOP

try:
    from playwright.async_api import async_playwright
except ImportError:  # pragma: no cover - the test extras bring it
    async_playwright = None


@dataclass
class Watch:
    dialogs: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    @property
    def csp_violations(self) -> list[str]:
        return [m for m in self.console if "Content Security Policy" in m or "Refused to" in m]

    @property
    def stray_texts(self) -> list[str]:
        return [m for m in self.console if STRAY_TEXT in m]


#: A value the page printed instead of text: the DOM's ``append(null)`` writes "null",
#: a missing field "undefined". Reported (as a console warning) by every page of every
#: browser test, for the whole test, not only for the screen it ends on. Text inside
#: code, pre and text fields is the member's or the model's, and may say "null".
STRAY_TEXT = "stray text"
STRAY_TEXT_WATCH = """(() => {
  const printed = new Set(["null", "undefined", "[object Object]"]);
  const mine = (text) => !text.parentElement?.closest("code, pre, textarea, [contenteditable]");
  const report = (text) => console.warn(
    `%STRAY% ${JSON.stringify(text.data)} in ${(text.parentElement?.outerHTML || "").slice(0, 300)}`);
  const scan = (node) => {
    if (node.nodeType === Node.TEXT_NODE) { if (printed.has(node.data.trim()) && mine(node)) report(node); return; }
    if (node.nodeType !== Node.ELEMENT_NODE && node.nodeType !== Node.DOCUMENT_FRAGMENT_NODE) return;
    const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) if (printed.has(text.data.trim()) && mine(text)) report(text);
  };
  new MutationObserver((records) => { for (const record of records) for (const node of record.addedNodes) scan(node); })
    .observe(document, { childList: true, subtree: true });
})();""".replace("%STRAY%", STRAY_TEXT)


class BrowserPages:
    """Open watched pages, each in its own context (its own cookie jar)."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser
        self.watch = Watch()
        self._contexts: list[Any] = []

    async def new(self, base_url: str, *, viewport: dict[str, int] = DESKTOP, locale: str = "en-US", timezone_id: str | None = None) -> Any:
        """``timezone_id``: the zone the browser reports (its clock's), e.g. "Europe/Berlin"."""
        context = await self.browser.new_context(base_url=base_url, viewport=viewport, locale=locale, timezone_id=timezone_id)
        await context.add_init_script(STRAY_TEXT_WATCH)
        self._contexts.append(context)
        return self._watched(await context.new_page())

    async def new_tab(self, page: Any) -> Any:
        """Another tab of ``page``'s browser (its session), at ``page``'s address, watched alike."""
        tab = self._watched(await page.context.new_page())
        await tab.goto(page.url)
        await tab.locator("#sidebar").wait_for(state="attached")
        return tab

    def _watched(self, page: Any) -> Any:
        page.set_default_timeout(5000)

        async def on_dialog(dialog: Any) -> None:
            self.watch.dialogs.append(f"{dialog.type}: {dialog.message}")
            await dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on("console", lambda message: self.watch.console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: self.watch.page_errors.append(str(error)))
        return page

    async def close(self) -> None:
        for context in self._contexts:
            await context.close()


@pytest_asyncio.fixture
async def browser_pages() -> AsyncIterator[BrowserPages]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium); the browser tests drive it")
    if async_playwright is None:
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        pages = BrowserPages(browser)
        try:
            yield pages
        finally:
            await pages.close()
            await browser.close()
    watch = pages.watch
    assert watch.dialogs == [], f"JavaScript dialogs opened: {watch.dialogs}"
    assert watch.page_errors == [], f"uncaught errors in the page: {watch.page_errors}"
    assert watch.csp_violations == [], f"CSP violations: {watch.csp_violations}"
    assert watch.stray_texts == [], f"the page printed a value instead of text: {watch.stray_texts}"
