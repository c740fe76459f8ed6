"""The plugin catalog's status buttons say which plugin they are about: a screen
reader's list of buttons was a column of identical "Status: Aus. Details anzeigen"."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD

from .kit import sign_in


async def test_every_status_button_names_its_plugin_in_the_admins_language(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200

    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    cards = page.locator("article.plugin-card")
    await expect(cards.first).to_be_visible()
    count = await cards.count()
    assert count >= 2

    names = []
    for index in range(count):
        card = cards.nth(index)
        title = (await card.locator("h2, h3").first.text_content() or "").strip()
        state = (await card.locator(".health").first.text_content() or "").strip()
        name = await card.locator(".health-dot").get_attribute("aria-label")
        assert title and name == f"Status von {title}: {state}. Details anzeigen", (title, state, name)
        names.append(name)
    assert len(set(names)) == count, "two status buttons read the same"

    # The accessible name Chromium computes (what a screen reader announces) has it too.
    first = cards.first
    title = (await first.locator("h2, h3").first.text_content() or "").strip()
    await expect(first.get_by_role("button", name=f"Status von {title}", exact=False)).to_have_count(1)
