"""What a newcomer learnt only from a refusal, said up front: the password's minimum
length under the setup's and the add-member form's password fields (their accessible
description), and where ``backup.every_hours`` is set."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.core.identity.passwords import MIN_LENGTH
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import sign_in


async def test_setup_says_the_password_minimum_before_a_submit(skald, browser_pages):
    host = await skald.start()
    assert (await host.client().get("/api/setup")).json()["password_min_length"] == MIN_LENGTH
    page = await browser_pages.new(host.url)
    await page.goto("/")
    await expect(page.get_by_role("heading", name="Welcome to Skald")).to_be_visible()
    password = page.get_by_label("Password", exact=True)
    await expect(password).to_have_accessible_description(f"At least {MIN_LENGTH} characters.")
    await expect(password).to_have_attribute("minlength", str(MIN_LENGTH))


async def test_the_add_member_and_reset_forms_say_the_password_minimum(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    erin = await host.create_member("erin", encrypted=False)
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#members")
    form = page.locator("form").filter(has=page.get_by_role("button", name="Add member"))
    await expect(form.get_by_role("textbox", name="Password")).to_have_accessible_description(
        "At least 8 characters. Give it to them in person; they can change it under “My account”.")
    await page.goto(f"/#members/{erin['id']}")
    reset = page.locator("form").filter(has=page.get_by_role("button", name="Reset password"))
    await expect(reset.get_by_label("New password", exact=True)).to_have_accessible_description("At least 8 characters.")


async def test_backups_say_where_the_schedule_is_set(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#settings")
    block = page.locator(".backups-block")
    config = host.settings.data_dir / "skald.yml"
    await expect(block.get_by_text("No backups are taken on a schedule")).to_have_text(
        f"No backups are taken on a schedule. For one, set backup.every_hours in {config} (or the environment variable "
        "SKALD_BACKUP_EVERY_HOURS) and restart the server; or take one now, or run skald backup.")
