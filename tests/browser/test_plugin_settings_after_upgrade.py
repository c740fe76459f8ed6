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
