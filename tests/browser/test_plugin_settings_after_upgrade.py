"""After an upgrade changed a plugin's settings, the admin is told which stored values
the new version refuses (its card, its page above each form), the forms show the
defaults the plugin reads instead, and saving the forms as shown works."""

from __future__ import annotations

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
