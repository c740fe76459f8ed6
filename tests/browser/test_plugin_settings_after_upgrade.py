"""After an upgrade changed a plugin's settings, the admin is told which stored values
the new version refuses (its card, its page above each form), the forms show the
defaults the plugin reads instead, and saving the forms as shown works."""

from __future__ import annotations

import re

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD

from tests.plugins.test_settings_after_upgrade import _upgraded
from .kit import sign_in


async def test_the_admin_sees_which_settings_fell_back_and_saving_the_form_works(skald, browser_pages):
    host, _ = await _upgraded(skald)
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)

    await page.goto("/#plugins")
    card = page.locator("article[data-plugin='tally']")
    await expect(card.get_by_test_id("stale-settings")).to_contain_text("max_step, unit, mode, tally_page.max_events")

    await page.goto("/#plugin-detail?id=tally")
    notes = page.locator(".notice.warning")
    await expect(notes).to_have_count(2)
    await expect(notes.nth(0)).to_contain_text("max_step, unit, mode")
    await expect(notes.nth(1)).to_contain_text("max_events")
    await expect(page.locator("input[name='max_step']")).to_have_value("5")  # the default the plugin reads, not 10

    for form in await page.locator("form.config-form").all():
        await form.get_by_role("button", name="Save").click()
        await expect(form.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    await expect(notes).to_have_count(0)  # it stayed after "Saved." until a reload (author probe)
    assert await host.core.catalog.stale_settings("tally") == []
    await page.goto("/#plugins")
    await expect(page.locator("article[data-plugin='tally']").get_by_test_id("stale-settings")).to_have_count(0)


async def test_removing_the_stored_values_asks_first_and_cancel_keeps_them(skald, browser_pages):
    """The stored values are what a downgrade reads: "Remove the stored values" deleted
    them at one click. It asks, saying so; cancelled, nothing is sent and they stay."""
    host, _ = await _upgraded(skald)
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    deletes: list[str] = []
    page.on("request", lambda request: deletes.append(request.url) if request.method == "DELETE" else None)
    await page.goto("/#plugin-detail?id=tally")
    notes = page.locator(".notice.warning")
    await expect(notes).to_have_count(2)

    await notes.nth(0).get_by_test_id("stale-remove").click()
    dialog = page.get_by_role("dialog", name="Remove the stored values of max_step, unit, mode?")
    await expect(dialog).to_contain_text("the previous version of the plugin, it reads its defaults too")
    # Described by its message (aria-describedby), read as it opens, not only its title.
    await expect(dialog).to_have_accessible_description(re.compile(r"^They are removed for good\..*reads its defaults too"))
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_have_count(0)
    await expect(notes).to_have_count(2)
    assert deletes == []
    assert await host.core.catalog.stale_settings("tally") != []

    await notes.nth(0).get_by_test_id("stale-remove").click()
    await page.get_by_role("dialog").get_by_role("button", name="Remove the stored values").click()
    await expect(notes).to_have_count(0)
    assert [url.split("/api/")[1] for url in deletes] == ["admin/plugins/tally/stale-settings"]
    assert await host.core.catalog.stale_settings("tally") == []


async def test_removing_the_stored_values_keeps_the_focus_and_a_refusal_keeps_the_button(skald, browser_pages):
    """Keyboard probe: a refused removal (503) replaced the notice's words with the error,
    a <p> in the <p>, took the button (no retry) and dropped the focus to <body>; a
    removal that worked dropped the focus to <body> too and said nothing."""
    host, _ = await _upgraded(skald)
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=tally")
    notes = page.locator(".notice.warning")
    await expect(notes).to_have_count(2)
    remove = notes.nth(0).get_by_test_id("stale-remove")

    async def unavailable(route):
        await route.fulfill(status=503, json={"error": "The server is busy; try again in a minute.", "code": "unavailable"})

    await page.route("**/api/admin/plugins/tally/stale-settings", unavailable)
    await remove.focus()
    await page.keyboard.press("Enter")
    await page.get_by_role("dialog").get_by_role("button", name="Remove the stored values").press("Enter")
    error = page.get_by_test_id("stale-remove-error").first
    await expect(error).not_to_be_empty()
    await expect(error).to_have_attribute("role", "alert")
    await expect(notes).to_have_count(2)
    await expect(notes.nth(0)).to_contain_text("max_step, unit, mode")  # the fields still named
    await expect(remove).to_be_focused()  # still there, for another try
    assert await page.locator("p p").count() == 0
    assert await host.core.catalog.stale_settings("tally") != []

    await page.unroute("**/api/admin/plugins/tally/stale-settings")
    await page.keyboard.press("Enter")
    await page.get_by_role("dialog").get_by_role("button", name="Remove the stored values").press("Enter")
    done = page.get_by_role("status").filter(has_text="Stored values removed.")
    await expect(done).to_have_count(1)
    await expect(done).to_be_focused()
    await expect(notes).to_have_count(0)
    await expect(page.get_by_test_id("stale-remove-error")).to_have_count(0)
    assert await host.core.catalog.stale_settings("tally") == []
