"""After an admin's password reset lost a member's data, the member is told so on the
start page (an admin probe: the member found an empty account and no reason)."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

NEW = "a fresh passphrase after the reset 9"


async def sign_in_after_reset(browser_pages: Any, host: Any) -> Any:
    """Dora's page, signed in with the password the admin's reset chose, once the shell
    is drawn: the admin chose it, so she is asked to choose her own first, and puts it off."""
    page = await browser_pages.new(host.url)
    await page.goto("/")
    await page.get_by_label("User name").fill("dora")
    await page.get_by_label("Password", exact=True).fill(NEW)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("button", name="Not now (I am asked again at my next sign-in)").click()
    await page.locator("#sidebar").wait_for(state="attached")
    return page


async def test_a_member_whose_data_a_reset_lost_is_told_on_the_start_page(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    dora = await host.member("dora")
    reset = await admin.post(f"/api/admin/members/{dora.member['id']}/reset-password", json={"new_password": NEW, "confirm_data_loss": True})
    assert reset.status_code == 200 and reset.json()["data_lost"] is True, reset.text
    page = await sign_in_after_reset(browser_pages, host)
    await expect(page.locator(".data-reset")).to_contain_text("An admin reset your password on")
    # What is true of the old data (SECURITY.md): kept aside, encrypted, its key beside it
    # wrapped with the old password; the operator's 'skald recover-reset' gives it back.
    await expect(page.locator(".data-reset")).to_contain_text("It is kept aside on the server")
    await expect(page.locator(".data-reset")).to_contain_text("your old database stays encrypted, and it opens only with your old password")
    await expect(page.locator(".data-reset")).to_contain_text("'skald recover-reset'")


async def test_a_reset_an_earlier_version_made_is_not_promised_back(skald, browser_pages):
    """An earlier version's reset kept no key file beside the old database: nothing
    opens it, so the notice must not send the member to the operator's recover-reset
    (operator probe: it did, and the command then found nothing)."""
    host = await skald.start()
    admin = await host.admin()
    dora = await host.member("dora")
    reset = await admin.post(f"/api/admin/members/{dora.member['id']}/reset-password", json={"new_password": NEW, "confirm_data_loss": True})
    assert reset.status_code == 200, reset.text
    keys = list(host.core.users.quarantine_dir().glob(f"{dora.member['id']}.*.key.json"))
    assert len(keys) == 1, keys
    keys[0].unlink()  # as a reset by a version from before the key file left it
    page = await sign_in_after_reset(browser_pages, host)
    await expect(page.locator(".data-reset")).to_contain_text("it cannot be given back, even with your old password")
    await expect(page.locator(".data-reset")).not_to_contain_text("recover-reset")
