"""After an admin's password reset lost a member's data, the member is told so on the
start page (an admin probe: the member found an empty account and no reason)."""

from __future__ import annotations

from playwright.async_api import expect

from .kit import sign_in

NEW = "a fresh passphrase after the reset 9"


async def test_a_member_whose_data_a_reset_lost_is_told_on_the_start_page(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    dora = await host.member("dora")
    reset = await admin.post(f"/api/admin/members/{dora.member['id']}/reset-password", json={"new_password": NEW, "confirm_data_loss": True})
    assert reset.status_code == 200 and reset.json()["data_lost"] is True, reset.text
    page = await browser_pages.new(host.url)
    await sign_in(page, "dora", NEW)
    await expect(page.locator(".data-reset")).to_contain_text("An admin reset your password on")
    await expect(page.locator(".data-reset")).to_contain_text("set aside on the server")
