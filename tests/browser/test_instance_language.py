"""The admin changes the instance's language on Settings (it was set only at setup,
and the page said there was nothing to configure): a member who chose no language of
their own then reads German, and the API refuses a language there is none of."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in


async def test_the_admin_sets_the_instance_language_and_members_on_the_default_read_it(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    await host.create_member("alice")  # no language of her own: the instance's
    await host.create_member("bob", locale="en")

    page = await browser_pages.new(host.url)
    await sign_in(page, host.admin_username, ADMIN_PASSWORD)
    await page.goto("/#settings")
    select = page.get_by_label("Language", exact=True)
    await expect(select).to_have_value("en")
    await select.select_option("de")
    await expect(page.get_by_role("status").filter(has_text="Saved: the instance now speaks")).to_be_visible()
    assert (await admin.get("/api/admin/language")).json()["locale"] == "de"

    alice = await browser_pages.new(host.url)
    await sign_in_german(alice, "alice")
    await expect(alice.get_by_role("navigation").get_by_role("link", name="Mein Konto")).to_be_visible()
    bob = await browser_pages.new(host.url)
    await sign_in_german(bob, "bob")
    await expect(bob.get_by_role("navigation").get_by_role("link", name="My account")).to_be_visible()

    refused = await admin.put("/api/admin/language", json={"locale": "xx"})
    assert refused.status_code == 400 and refused.json()["code"] == "locale_unknown", refused.text
    member = await host.member("alice")
    assert (await member.put("/api/admin/language", json={"locale": "en"})).status_code == 403
    assert (await admin.get("/api/admin/language")).json()["locale"] == "de"


async def sign_in_german(page: Any, username: str) -> None:
    """Sign in on the form the instance's language draws (German here)."""
    await page.goto("/")
    await page.get_by_label("Benutzername").fill(username)
    await page.get_by_label("Passwort", exact=True).fill(MEMBER_PASSWORD)
    await page.get_by_role("button", name="Anmelden").click()
    await page.locator("#sidebar").wait_for(state="attached")


async def test_the_sign_in_page_speaks_the_instance_language_not_the_browsers(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    assert (await admin.put("/api/admin/language", json={"locale": "de"})).status_code == 200
    await host.create_member("bob", locale="en")

    page = await browser_pages.new(host.url, locale="en-US")
    await page.goto("/")
    await expect(page.get_by_role("heading", name="Anmelden")).to_be_visible()
    await expect(page.get_by_label("Benutzername")).to_be_visible()
    await expect(page.get_by_label("Passwort", exact=True)).to_be_visible()
    await expect(page.locator("html")).to_have_attribute("lang", "de")
    await page.reload()
    await expect(page.get_by_role("heading", name="Anmelden")).to_be_visible()

    # Signed in, a member's own language wins, as before.
    await sign_in_german(page, "bob")
    await expect(page.get_by_role("navigation").get_by_role("link", name="My account")).to_be_visible()
