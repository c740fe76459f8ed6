"""The supervised member is told when someone starts supervising them (README), on the
web too when they were signed out at that moment (newcomer probe: the live notice
reached only an open page or a home channel, and their next sign-in said nothing). The
notice says it in their language above the page until OK, and not again after; one
named while their page is open stays there until OK as well, not only as a toast."""

from __future__ import annotations

import asyncio

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in

GERMAN = "Ab jetzt werden deine Gespräche beaufsichtigt von: Pat. Jede Nacht bekommen sie eine Zusammenfassung deiner Gespräche ab jetzt (frühere nicht); Mein Konto zeigt, wer."


async def test_a_member_signed_out_when_supervised_is_told_at_sign_in_until_ok(skald, browser_pages):
    host = await skald.start(settings=skald.settings(system_agents={"run": False}))
    admin = await host.admin()
    pat = await host.create_member("pat", display_name="Pat")
    kid = await host.create_member("kid", display_name="Kid", locale="de", encrypted=False)
    named = await admin.put(f"/api/admin/members/{kid['id']}/supervisors", json={"supervisors": [pat["id"]]})
    assert named.status_code == 200, named.text

    page = await browser_pages.new(host.url)
    await sign_in(page, "kid", MEMBER_PASSWORD)
    told = page.get_by_test_id("supervision-added")
    await expect(told).to_have_attribute("role", "status")
    await expect(told.locator("p").first).to_have_text(GERMAN)
    ok = told.get_by_role("button", name="OK")
    await expect(ok).to_have_accessible_description(GERMAN)
    await page.goto("/#account")  # it stays above every page until OK
    await expect(told).to_be_visible()
    await ok.focus()
    await page.keyboard.press("Enter")
    await expect(told).to_have_count(0)
    # The focus went to the page, not to <body> with the button.
    assert await page.evaluate("document.activeElement !== document.body")
    await expect(page.get_by_test_id("supervised")).to_have_text("Deine Gespräche werden beaufsichtigt von: Pat.")

    await page.reload()
    await page.locator("#sidebar").wait_for(state="attached")
    await expect(page.get_by_test_id("supervised")).to_be_visible()
    await expect(told).to_have_count(0)
    again = await browser_pages.new(host.url)
    await sign_in(again, "kid", MEMBER_PASSWORD)
    await expect(again.locator("h1")).to_be_visible()
    await expect(again.get_by_test_id("supervision-added")).to_have_count(0)


async def test_a_supervisor_named_while_the_page_is_open_stays_until_ok_and_is_not_said_again(skald, browser_pages):
    host = await skald.start(settings=skald.settings(system_agents={"run": False}))
    admin = await host.admin()
    pat = await host.create_member("pat", display_name="Pat")
    bob = await host.create_member("bob", display_name="Bob")
    page = await browser_pages.new(host.url)
    await sign_in(page, "bob", MEMBER_PASSWORD)
    await expect(page.locator("h1")).to_be_visible()
    await expect(page.get_by_test_id("supervision-added")).to_have_count(0)
    for _ in range(100):  # a notification is not replayed: the page's socket must be there
        if host.core.buses.members.listening(bob["id"]):
            break
        await asyncio.sleep(0.05)

    named = await admin.put(f"/api/admin/members/{bob['id']}/supervisors", json={"supervisors": [pat["id"]]})
    assert named.status_code == 200, named.text
    told = page.get_by_test_id("supervision-added")
    await expect(told).to_contain_text("From now on your conversations are supervised by: Pat.")
    await expect(page.get_by_test_id("toast")).to_have_count(0)  # the same words once, not twice
    await told.get_by_role("button", name="OK").click()
    await expect(told).to_have_count(0)

    again = await browser_pages.new(host.url)
    await sign_in(again, "bob", MEMBER_PASSWORD)
    await expect(again.locator("h1")).to_be_visible()
    await expect(again.get_by_test_id("supervision-added")).to_have_count(0)
