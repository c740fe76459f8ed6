"""The Plugins page shows a plugin that the admin enabled but that failed to load as
failed, with its switch on (the admin's choice, kept for after the fix), which can
only be turned off; one never enabled keeps its switch off, and cannot be turned on."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from skald_hookspecs import hookimpl
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import PagePlugin, sign_in


class RoutesExplode(PagePlugin):
    @hookimpl
    def register_routes(self, register: Any) -> None:
        raise RuntimeError("routes exploded")


async def test_a_failed_plugins_switch_shows_the_admins_choice(skald, browser_pages):
    host = await skald.start(plugins=[PagePlugin("flaky", title="Flaky")], enable=["flaky"])
    await host.stop()
    host = await skald.start(plugins=[RoutesExplode("flaky", title="Flaky"), RoutesExplode("never", title="Never")])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")

    flaky = page.get_by_role("switch", name="Enable Flaky", exact=True)
    await expect(flaky).to_be_checked()
    await expect(flaky).to_be_enabled()  # on: it can be turned off (test_plugin_switch_off_and_form_values)
    await expect(page.locator("[data-plugin=flaky] .state-label")).to_have_text("Failed")
    await expect(page.locator("[data-plugin=flaky] .card-problem")).to_contain_text("routes exploded")
    never = page.get_by_role("switch", name="Enable Never", exact=True)
    await expect(never).not_to_be_checked()
    await expect(never).to_be_disabled()
