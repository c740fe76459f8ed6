"""A plugin page whose element throws as it mounts (its constructor, its
connectedCallback) showed an empty body: the browser only reports such an error (to
the console), it does not throw it to the shell that mounted the element. The shell
says the page could not be loaded, and why, as for a module that cannot be imported."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect
from quart import Blueprint, Response

from skald_hookspecs import hookimpl
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import PagePlugin, sign_in

MODULES = {
    "connected": 'export default class extends HTMLElement { connectedCallback() { throw new Error("no data yet"); } }',
    "constructed": 'export default class extends HTMLElement { constructor() { super(); throw new TypeError("bad start"); } }',
}


class ThrowingPage(PagePlugin):
    def __init__(self, plugin_id: str, module: str) -> None:
        super().__init__(plugin_id, title=plugin_id, page_title="Thrower")
        self.module = module

    @hookimpl
    def register_routes(self, register: Any) -> None:
        blueprint = Blueprint(f"test_{self.plugin_id}", __name__)

        @blueprint.get("/page.js")
        async def page_module() -> Response:
            return Response(self.module, content_type="text/javascript; charset=utf-8")

        register(blueprint)


@pytest.mark.parametrize("where", sorted(MODULES))
async def test_a_page_element_that_throws_as_it_mounts_says_the_page_could_not_be_loaded(skald, browser_pages, where):
    host = await skald.start(plugins=[ThrowingPage("thrower", MODULES[where])], enable=["thrower"])
    await host.admin()
    page = await browser_pages.new(host.url)
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin/thrower/main")
    alert = page.locator("plugin-page-host").get_by_role("alert")
    await expect(alert).to_contain_text("The page “Thrower” could not be loaded.")
    await expect(alert).to_contain_text("Its element failed as it started: " + ("no data yet" if where == "connected" else "bad start"))
    await expect(page.locator("plugin-page-host")).not_to_have_attribute("aria-busy", "true")
    # Still in the console, for the page's author.
    assert any(("no data yet" if where == "connected" else "bad start") in line for line in console), console


async def test_a_page_element_that_throws_is_said_in_german(skald, browser_pages):
    host = await skald.start(plugins=[ThrowingPage("thrower", MODULES["connected"])], enable=["thrower"])
    admin = await host.admin()
    berta = await host.create_member("berta", locale="de")
    granted = await admin.put(f"/api/admin/members/{berta['id']}/plugins", json={"plugins": ["thrower"]})
    assert granted.status_code == 200, granted.text
    page = await browser_pages.new(host.url)
    await sign_in(page, "berta", MEMBER_PASSWORD)
    await page.goto("/#plugin/thrower/main")
    alert = page.locator("plugin-page-host").get_by_role("alert")
    await expect(alert).to_contain_text("Die Seite „Thrower“ konnte nicht geladen werden.")
    await expect(alert).to_contain_text("Ihr Element ist beim Start gescheitert: no data yet")
