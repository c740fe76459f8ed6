"""An enabled plugin whose package is installed no more: its card says so, red, with
what to do, and its switch turns it off, which takes it off the list."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in


async def test_a_missing_plugins_card_says_why_and_turning_it_off_dismisses_it(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    await host.core.catalog.store_row("ghost", None, enabled=True)  # its row, as an uninstalled plugin leaves it
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    card = page.locator("article.plugin-card[data-plugin='ghost']")
    await expect(card.locator(".state-label")).to_have_text("Not installed")
    await expect(card.locator(".health-dot")).to_have_class("health-dot red")
    await expect(card.locator(".card-problem")).to_have_text("It does not run: Installed no more: reinstall the package or disable it.")
    switch = card.get_by_role("switch", name="Enable ghost")
    await expect(switch).to_be_checked()
    await switch.click()
    dismissed = page.get_by_role("status").filter(has_text="ghost is off and no longer listed")
    await expect(dismissed).to_be_focused()
    await expect(card).to_have_count(0)
    await page.reload()
    await expect(page.locator("article.plugin-card").first).to_be_visible()
    await expect(page.locator("article.plugin-card[data-plugin='ghost']")).to_have_count(0)


async def test_a_missing_plugins_card_in_german(skald, browser_pages):
    host = await skald.start()
    await host.create_member("greta", role="admin", locale="de")
    await host.core.catalog.store_row("ghost", None, enabled=True)
    page = await browser_pages.new(host.url)
    await sign_in(page, "greta", MEMBER_PASSWORD)
    await page.goto("/#plugins")
    card = page.locator("article.plugin-card[data-plugin='ghost']")
    await expect(card.locator(".state-label")).to_have_text("Nicht installiert")
    await expect(card.locator(".card-problem")).to_contain_text("Nicht mehr installiert: installiere das Paket erneut oder schalte es aus.")
    await card.get_by_role("link", name="Details: ghost").click()
    await expect(page.get_by_role("alert").filter(has_text="sein Paket ist nicht mehr installiert")).to_be_visible()
