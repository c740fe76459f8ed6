"""On a phone, a page opened from the menu shows its title below the sticky top bar:
focusing the page's content scrolled it so the title sat under the bar (a regression
walk), while a reload showed it right."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD

from .kit import PHONE, sign_in


async def test_a_page_opened_from_the_phone_menu_shows_its_title_below_the_top_bar(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url, viewport=PHONE)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    for name in ("Plugins", "Settings"):
        await page.get_by_role("button", name="Menu").click()
        await page.locator("#sidebar").get_by_role("link", name=name, exact=True).click()
        title = page.get_by_role("heading", level=1, name=name)
        await expect(title).to_be_visible()
        bar = await page.locator(".topbar").bounding_box()
        box = await title.bounding_box()
        assert bar is not None and box is not None and box["y"] >= bar["y"] + bar["height"], (name, box, bar)
