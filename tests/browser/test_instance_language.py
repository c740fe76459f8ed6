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
    await page.locator(".language-form").get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved: the instance now speaks")).to_be_visible()
    assert (await admin.get("/api/admin/language")).json()["locale"] == "de"

    alice = await browser_pages.new(host.url)  # an English browser: its sign-in page is English
    await sign_in(alice, "alice", MEMBER_PASSWORD)
    await expect(alice.get_by_role("navigation").get_by_role("link", name="Mein Konto")).to_be_visible()
    bob = await browser_pages.new(host.url)
    await sign_in(bob, "bob", MEMBER_PASSWORD)
    await expect(bob.get_by_role("navigation").get_by_role("link", name="My account")).to_be_visible()

    refused = await admin.put("/api/admin/language", json={"locale": "xx"})
    assert refused.status_code == 400 and refused.json()["code"] == "locale_unknown", refused.text
    member = await host.member("alice")
    assert (await member.put("/api/admin/language", json={"locale": "en"})).status_code == 403
    assert (await admin.get("/api/admin/language")).json()["locale"] == "de"


async def test_the_sign_in_page_speaks_what_the_browser_last_showed_else_its_own_language_else_the_instances(skald, browser_pages):
    """A newcomer set up a German instance, then met an English sign-in page after a
    restart, in a browser that had shown them German all along."""
    host = await skald.start()
    admin = await host.admin()
    assert (await admin.put("/api/admin/language", json={"locale": "de"})).status_code == 200
    await host.create_member("alice")  # no language of her own: the instance's

    french = await browser_pages.new(host.url, locale="fr-FR")  # a language the instance has not
    await french.goto("/")
    await expect(french.get_by_role("heading", name="Anmelden")).to_be_visible()
    await expect(french.locator("html")).to_have_attribute("lang", "de")

    page = await browser_pages.new(host.url, locale="en-US")
    await page.goto("/")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await sign_in(page, "alice", MEMBER_PASSWORD)
    nav = page.get_by_role("navigation", name="Hauptnavigation")
    await expect(nav.get_by_role("link", name="Mein Konto")).to_be_visible()
    await nav.get_by_role("button", name="Abmelden").click()
    await expect(page.get_by_role("heading", name="Anmelden")).to_be_visible()
    await page.reload()  # as after a restart: the language this browser showed her
    await expect(page.get_by_role("heading", name="Anmelden")).to_be_visible()
    await expect(page.get_by_label("Benutzername")).to_be_visible()
