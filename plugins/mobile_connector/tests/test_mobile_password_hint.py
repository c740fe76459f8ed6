"""A password change ends every paired phone's device token with the member's other
sessions: My account says so before the change, when the member can use the mobile
connector (GET /api/me/privacy lists it), and not where they cannot."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

PHONES = ("Your other sessions end, and your paired phones are unpaired: pair them again afterwards."
          " This one stays signed in. Your private data stays readable.")
PLAIN = "Your other sessions end; this one stays signed in. Your private data stays readable."


async def test_my_account_says_before_a_password_change_that_phones_must_be_paired_again(setup, plugin_browser):
    await setup.host.member("alice")
    page = await plugin_browser.new_page()
    await plugin_browser.sign_in(page, setup.host, "alice", MEMBER_PASSWORD)
    await page.goto(setup.host.url + "/#account")
    await page.reload()  # signed in by fetch: the shell comes with a load
    privacy = page.get_by_test_id("privacy")
    await expect(privacy.get_by_role("heading", name="Plugins that can act for you")).to_be_visible()  # the facts came
    await expect(privacy).to_contain_text("Mobile app")
    await expect(page.get_by_test_id("password-hint")).to_have_text(PHONES)

    await setup.enable(False)
    await page.reload()
    await expect(privacy.get_by_role("heading", name="Plugins that can act for you")).to_be_visible()
    await expect(privacy).not_to_contain_text("Mobile app")
    await expect(page.get_by_test_id("password-hint")).to_have_text(PLAIN)
