"""The session ended with no warning (WCAG 2.2.1, found by an accessibility probe): with
``auth.session_idle_minutes`` 1 the Members page became the sign-in form after a minute
without a request, and the Add member form was empty after signing in again. Shortly
before the end a dialog now says so, and Stay signed in asks the server (every request
starts the idle time again)."""

from __future__ import annotations

import re

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD

from .kit import sign_in


async def test_before_an_idle_session_ends_a_dialog_warns_and_stay_signed_in_keeps_it(skald, browser_pages):
    host = await skald.start(settings=skald.settings(auth={"session_idle_minutes": 1}))
    session = await (await host.admin()).get("/api/auth/session")
    assert session.json()["idle_seconds"] == 60
    page = await browser_pages.new(host.url)
    await page.clock.install()
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#members")
    field = page.locator("form input[name=username]")
    await field.fill("newcomer")
    dialog = page.get_by_role("dialog", name="Your session is about to end")

    await page.clock.fast_forward(20_000)
    await expect(dialog).to_have_count(0)  # half the minute: not yet
    await page.clock.fast_forward(15_000)
    await expect(dialog).to_be_visible()
    await expect(dialog).to_have_accessible_description(re.compile(r"in \d+ seconds you will be signed out"))
    stay = dialog.get_by_role("button", name="Stay signed in")
    await expect(stay).to_be_focused()  # a screen reader is in the dialog, told what it says
    async with page.expect_request(lambda request: request.url.endswith("/api/auth/session")) as asked:
        await page.keyboard.press("Enter")
    assert (await (await asked.value).response()).status == 200
    await expect(dialog).to_have_count(0)
    await expect(field).to_be_focused()  # back where the member was typing
    await expect(field).to_have_value("newcomer")

    # The next warning is timed from that request, and Escape keeps the session too.
    await page.clock.fast_forward(20_000)
    await expect(dialog).to_have_count(0)
    await page.clock.fast_forward(15_000)
    await expect(dialog).to_be_visible()
    async with page.expect_request(lambda request: request.url.endswith("/api/auth/session")):
        await page.keyboard.press("Escape")
    await expect(dialog).to_have_count(0)
    await expect(page.locator("#sidebar")).to_be_attached()
