"""The theme switch's choice follows the member to other browsers through their
settings. A choice whose save never reached the server (cut by a reload right after the
change — a clean-clone CI run hit it under load — or failed) must not be undone by the
older stored choice when the page loads again: this browser's choice is the newer one,
and it is saved then."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in


async def test_a_theme_whose_save_was_lost_is_kept_and_saved_at_the_next_load(skald, browser_pages):
    host = await skald.start()
    await host.create_member("ida")
    page = await browser_pages.new(host.url)
    await page.emulate_media(color_scheme="light")
    await sign_in(page, "ida", MEMBER_PASSWORD)
    member = await host.member("ida")

    # The save is lost on its way (as a reload cuts it): the server still holds no choice.
    await page.route("**/api/me/settings", lambda route: route.abort() if route.request.method == "PUT" else route.continue_())
    await page.get_by_label("Theme").select_option("dark")
    await expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    stored = await member.get("/api/me/settings")
    assert stored.json()["settings"].get("theme") in (None, "system"), stored.text

    await page.unroute("**/api/me/settings")
    await page.reload()
    await expect(page.get_by_label("Theme")).to_have_value("dark")
    await expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert await page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == "rgb(23, 25, 28)"
    # ... and the load saved it: another browser gets it.
    elsewhere = await browser_pages.new(host.url)
    await sign_in(elsewhere, "ida", MEMBER_PASSWORD)
    await expect(elsewhere.locator("html")).to_have_attribute("data-theme", "dark")
