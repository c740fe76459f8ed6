"""A pairing code past its ten minutes on the member's Mobile app page: it stayed on
screen unchanged, as if a phone could still use it (found by an accessibility probe)."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD
from mobile_support import PLUGIN


async def test_an_expired_code_is_replaced_by_a_notice_that_offers_a_new_one(setup, plugin_browser):
    await setup.host.member("alice")
    page = await plugin_browser.new_page(base_url=setup.host.url)
    page.set_default_timeout(10_000)
    await page.clock.install()
    await plugin_browser.sign_in(page, setup.host, "alice", MEMBER_PASSWORD)
    await plugin_browser.mount(page, PLUGIN, "main")
    await page.get_by_role("button", name="Show a pairing code").click()
    await expect(page.locator(".mobile-code")).to_be_visible()

    await page.clock.fast_forward("12:00")  # the page said "valid for 10 minutes"
    notice = page.locator(".mobile-pairing .mobile-expired")
    await expect(notice).to_have_text("This code has expired: it was valid for 10 minutes. Show a new one when the phone is ready.")
    await expect(page.locator(".mobile-code")).to_have_count(0)
    assert await page.locator(".mobile-pairing").get_attribute("aria-live") == "polite"  # said, not only shown

    await page.get_by_role("button", name="Show a new code").click()
    await expect(page.locator(".mobile-code")).to_be_visible()
    await expect(notice).to_have_count(0)
