"""A mistyped address (``/einstellungen``) in a real browser: a 404 page in the
browser's language, in the app's stylesheet, that axe finds nothing wrong with, and
whose link leads to the start page (it used to show the API's raw English JSON)."""

from __future__ import annotations

from playwright.async_api import expect

from .kit import screenshot
from .test_accessibility import assert_no_violations


async def test_a_mistyped_address_shows_a_german_page_that_leads_home(skald, browser_pages):
    host = await skald.start()
    await host.setup_admin()
    page = await browser_pages.new(host.url, locale="de-DE")
    response = await page.goto("/einstellungen")
    assert response is not None and response.status == 404
    assert await page.get_attribute("html", "lang") == "de"
    await expect(page.get_by_role("main").get_by_role("heading", name="Seite nicht gefunden", level=1)).to_be_visible()
    assert await page.title() == "Seite nicht gefunden · Skald"
    # Drawn by the app's stylesheet (the sign-in screen's card), not the browser's defaults.
    assert await page.locator(".auth-card").evaluate("(card) => getComputedStyle(card).borderRadius") != "0px"
    await assert_no_violations(page, "404 de")
    await screenshot(page, "not-found-page-de")
    await page.get_by_role("link", name="Zur Startseite").click()
    await expect(page.get_by_role("heading", name="Anmelden")).to_be_visible()


async def test_a_mistyped_address_shows_an_english_page_on_a_phone(skald, browser_pages):
    host = await skald.start()
    await host.setup_admin()
    page = await browser_pages.new(host.url, viewport={"width": 390, "height": 844})
    response = await page.goto("/ui/nope.js")
    assert response is not None and response.status == 404
    assert await page.get_attribute("html", "lang") == "en"
    await expect(page.get_by_role("heading", name="Page not found", level=1)).to_be_visible()
    await assert_no_violations(page, "404 en phone")
    await screenshot(page, "not-found-page-en-phone")


async def test_an_address_with_a_slash_after_the_hash_is_read_as_without_it(skald, browser_pages):
    """``#/admin/models`` opened "Conversation not found" and asked the host for a
    conversation named "admin" (newcomer probe): a leading slash is no part of a page's
    name, so ``#/models`` is the Models page and ``#/admin/models`` a page that is not."""
    from skald_host.testing.host import ADMIN_PASSWORD

    from .kit import sign_in

    host = await skald.start()
    await host.setup_admin()
    page = await browser_pages.new(host.url)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/api/conversations/" in request.url else None)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#/models")
    await expect(page.get_by_role("heading", name="Models", level=1)).to_be_visible()
    await page.goto("/#/admin/models")
    await expect(page.get_by_role("heading", name="Page not found", level=1)).to_be_visible()
    assert not [url for url in asked if url.endswith("/api/conversations/admin")], asked
