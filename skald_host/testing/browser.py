"""A plugin's page in a real browser, for plugin authors' tests (and the host's).

The ``plugin_browser`` fixture (registered with ``skald``) starts Chromium through
Playwright once per test, or skips the test where either is missing::

    async def test_my_page(skald, plugin_browser):
        host = await skald.start(plugins=[my_plugin], enable=["my-plugin"])
        await host.create_member("alice")
        page = await plugin_browser.open(host, "alice", MEMBER_PASSWORD, "my-plugin", "main")
        await page.locator("skald-p-my-plugin-main .greeting").wait_for()

``open`` signs the member in over HTTP in the page's own context (the session cookie is
the browser's), loads the member's language as the shell does (their saved one, else
the instance's), and mounts the page as the shell's ``<plugin-page-host>`` does: it imports
the module from ``/api/plugin/<plugin>/<entry>``, defines its default export under the
tag ``skald-p-<plugin>-<page>`` and mounts it with ``plugin-id`` and ``page-id``.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

MOUNT_PAGE = """async ([entry, pluginId, pageId, tag]) => {
    // The member's language, as the shell takes it when it enters with a session.
    const session = await (await fetch("/api/auth/session", {headers: {Accept: "application/json"}})).json();
    const i18n = await import("/ui/lib/i18n.js");
    await i18n.loadLocale(session.locale || session.member.locale || i18n.browserLocale());
    const module = await import(entry);
    if (!customElements.get(tag)) customElements.define(tag, module.default);
    const page = document.createElement(tag);
    page.setAttribute("plugin-id", pluginId);
    page.setAttribute("page-id", pageId);
    document.body.replaceChildren(page);
}"""

SIGN_IN = """async ([username, password]) => (await fetch("/api/auth/login", {method: "POST",
    headers: {"Content-Type": "application/json"}, body: JSON.stringify({username, password})})).status"""


def tag_for(plugin_id: str, page_id: str) -> str:
    """The tag a page is mounted under (``skald-p-<plugin>-<page>``, as the shell names it)."""
    def slug(value: str) -> str:
        return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-") or "x"

    return f"skald-p-{slug(plugin_id)}-{slug(page_id)}"


class PluginBrowser:
    """Chromium for one test: ``open`` a plugin's page as a member, ``new_page`` for
    anything else. Every context is closed with the browser at the end of the test."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser

    async def new_page(self, **context: Any) -> Any:
        """A page in a fresh context (its own cookies); ``context`` as Playwright's
        ``new_context`` takes it (``locale``, ``viewport``, ...)."""
        return await (await self.browser.new_context(**context)).new_page()

    async def sign_in(self, page: Any, host: Any, username: str, password: str) -> None:
        await page.goto(host.url + "/")
        status = await page.evaluate(SIGN_IN, [username, password])
        if status != 200:
            raise AssertionError(f"signing in {username!r} answered {status}")

    async def open(
        self, host: Any, username: str, password: str, plugin_id: str, page_id: str = "main", *, entry: str = "page.js", **context: Any
    ) -> Any:
        """A new page, signed in as ``username``, showing the plugin's page ``page_id``
        (its module at ``/api/plugin/<plugin_id>/<entry>``)."""
        page = await self.new_page(**context)
        await self.sign_in(page, host, username, password)
        await self.mount(page, plugin_id, page_id, entry=entry)
        return page

    async def mount(self, page: Any, plugin_id: str, page_id: str = "main", *, entry: str = "page.js") -> str:
        """Mount the plugin's page in ``page`` (signed in already, say with listeners of
        its own attached first); returns the tag it is mounted under."""
        tag = tag_for(plugin_id, page_id)
        await page.evaluate(MOUNT_PAGE, [f"/api/plugin/{plugin_id}/{entry}", plugin_id, page_id, tag])
        return tag


def chromium_executable() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")
