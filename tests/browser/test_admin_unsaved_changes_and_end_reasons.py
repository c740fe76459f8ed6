"""An admin probe: a member's "Can sign in" applies on Save, and leaving a page with
unsaved changes asks first ("Leave without saving?" / "Stay"; the tab's close too); a
reversed usage period is marked at From with its own words; a member whose session an
admin's deactivation or reset ended is told why at sign-in; a reset's success names the
shared folders and projects the member was taken out of."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in

BEFORE_UNLOAD = "() => { const e = new Event('beforeunload', { cancelable: true }); window.dispatchEvent(e); return e.defaultPrevented; }"


async def test_a_switched_member_is_not_left_unsaved_without_asking(skald, browser_pages):
    host = await skald.start()
    alice = await host.member("alice")
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    member_hash = f"#members/{alice.member['id']}"
    await page.goto(f"/{member_hash}")
    switch = page.get_by_role("switch", name="Can sign in")
    await expect(switch).to_be_checked()
    description = await switch.evaluate("(node) => node.getAttribute('aria-describedby').split(' ').map((id) => document.getElementById(id).textContent).join(' ')")
    assert "when you press Save" in description, description

    await switch.click()
    assert await page.evaluate(BEFORE_UNLOAD) is True  # closing the tab asks
    nav = page.get_by_role("navigation", name="Main navigation")
    await nav.get_by_role("link", name="Usage").click()
    dialog = page.get_by_role("dialog", name="Leave without saving?")
    await expect(dialog).to_be_visible()
    await dialog.get_by_role("button", name="Stay").click()
    await expect(dialog).to_be_hidden()
    assert page.url.endswith(member_hash)
    await expect(switch).not_to_be_checked()  # the change is still there to save

    # Saved (the deactivation asked first): leaving asks nothing more.
    await expect(page.get_by_text("Signed in on 1 device or browser.")).to_be_visible()
    await page.get_by_role("button", name="Save", exact=True).first.click()
    await page.get_by_role("dialog").get_by_role("button", name="Turn off sign-in").click()
    await expect(page.get_by_text("Saved.")).to_be_visible()
    # It signed her out everywhere: the count says so without a reload (admin walk).
    await expect(page.get_by_text("Signed in on 0 devices or browsers.")).to_be_visible()
    assert not (await host.core.users.get(alice.member["id"])).active
    assert await page.evaluate(BEFORE_UNLOAD) is False
    await nav.get_by_role("link", name="Usage").click()
    await expect(page.get_by_role("heading", name="Usage", level=1)).to_be_visible()
    await expect(page.get_by_role("dialog")).to_have_count(0)

    # Leaving anyway: the admin goes where they asked, the change discarded.
    await page.goto(f"/{member_hash}")
    await page.get_by_label("Display name").first.fill("Alice A.")
    await nav.get_by_role("link", name="Roles").click()
    dialog = page.get_by_role("dialog", name="Leave without saving?")
    await dialog.get_by_role("button", name="Leave without saving").click()
    await expect(page.get_by_role("heading", name="Roles", level=1)).to_be_visible()
    assert page.url.endswith("#roles")


async def test_a_reversed_usage_period_is_marked_at_from_in_its_own_words(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#usage")
    since = page.get_by_label("From")
    await since.fill("2026-03-10")
    await page.get_by_label("To (included)").fill("2026-03-01")
    await page.get_by_role("button", name="Show").click()
    await expect(since).to_have_attribute("aria-invalid", "true")
    await expect(page.locator(".field-error")).to_have_text("From must not be after the end of the period.")
    # A question, not a change to save: leaving asks nothing.
    await page.get_by_role("navigation", name="Main navigation").get_by_role("link", name="Members").click()
    await expect(page.get_by_role("heading", name="Members", level=1)).to_be_visible()


@pytest.mark.parametrize(("action", "told"), [
    ("deactivate", "An admin deactivated your account"),
    ("reset", "An admin reset your password"),
])
async def test_the_ended_session_is_told_why_and_the_sign_in_is_not(skald, browser_pages, action, told):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#account")
    await expect(page.get_by_role("heading", level=1)).to_be_visible()
    if action == "deactivate":
        answer = await admin.patch(f"/api/admin/members/{alice.member['id']}", json={"active": False})
    else:
        answer = await admin.post(f"/api/admin/members/{alice.member['id']}/reset-password",
                                  json={"new_password": "a brand new password 42", "confirm_data_loss": True})
    assert answer.status_code == 200, answer.text
    await expect(page.get_by_text(told)).to_be_visible()
    await expect(page.get_by_text("Your session has ended")).to_have_count(0)
    # The sign-in itself says only what it says for any wrong name or password.
    await page.get_by_label("User name").fill("alice")
    await page.get_by_label("Password", exact=True).fill(MEMBER_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_text("Wrong user name or password.")).to_be_visible()


async def test_a_reset_names_the_folders_and_projects_it_took_away(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    folder = await admin.post("/api/admin/shared-folders", json={"slug": "garden", "title": "Garden photos"})
    assert (await admin.post(f"/api/admin/shared-folders/{folder.json()['id']}/members", json={"username": "alice"})).status_code == 201
    assert (await alice.post("/api/projects", json={"slug": "recipes", "title": "Recipes"})).status_code == 201
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto(f"/#members/{alice.member['id']}")
    await page.get_by_label("New password", exact=True).fill("a brand new password 42")
    await page.get_by_label("Repeat new password").fill("a brand new password 42")
    await page.get_by_label("I understand that").check()
    await page.get_by_role("button", name="Reset password").click()
    await expect(page.get_by_text("They were removed from: Garden photos, Recipes.")).to_be_visible()
    await expect(page.get_by_text("Signed in on 0 devices or browsers.")).to_be_visible()  # the reset signed her out
    await expect(page.get_by_role("dialog")).to_have_count(0)
