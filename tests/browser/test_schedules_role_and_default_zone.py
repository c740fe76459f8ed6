"""The scheduled-prompts page agrees with the server and the assistant: a role without
scheduled prompts is told so instead of being offered a form the server refuses, and a
new prompt runs where the assistant's would (the member's saved zone, else UTC), with
the browser's zone one click away (newcomer walk)."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.core.schedules import service
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in

NOT_IN_ROLE = "Your role does not include scheduled prompts: you can pause, resume or delete the ones listed here, but not create or change them."


async def test_a_role_without_scheduled_prompts_sees_why_instead_of_the_form_and_keeps_its_jobs(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    # a role with few capabilities and the full interface: the pages under test are in it (the
    # seeded role's simple one leaves them out, see test_simple_interface.py)
    assert (await admin.patch("/api/admin/roles/restricted", json={"attrs": {"ui_mode": "full"}})).status_code == 200
    kim = await host.member("kim", role="restricted")  # the seeded "Children" role: no tools.schedule
    assert (await kim.post("/api/schedules", json={"prompt": "Homework.", "every": "every day at 5pm"})).status_code == 403
    # A job from before the role changed: listed, and what the API allows is offered.
    assert (await kim.get("/api/schedules")).status_code == 200  # listing is theirs (chat.use); it opens their runtime
    runtime = host.core.chat.live_runtime(kim.member["id"])
    conversation = await runtime.create_conversation(title="Homework")
    job = await service.create(runtime.store, conversation["id"], "Homework.", every="every day at 5pm", timezone="Europe/Berlin")

    page = await browser_pages.new(host.url)
    await sign_in(page, "kim", MEMBER_PASSWORD)
    await page.goto("/#schedules")
    row = page.locator(f"tr[data-job='{job['id']}']")
    await expect(row).to_be_visible()
    await expect(page.get_by_test_id("schedules-not-in-role")).to_have_text(NOT_IN_ROLE)
    await expect(page.get_by_test_id("schedule-new")).to_have_count(0)
    await expect(page.get_by_role("heading", name="New scheduled prompt")).to_have_count(0)
    await expect(row.get_by_role("link", name="Edit: Homework.")).to_have_count(0)  # PATCHing its prompt is refused
    await row.get_by_role("button", name="Pause: Homework.").click()
    await expect(row).to_have_attribute("data-paused", "true")

    await page.goto(f"/#schedules?edit={job['id']}")  # an old link to its form
    await expect(page.get_by_test_id("schedules-not-in-role")).to_have_text(NOT_IN_ROLE)
    await expect(page.get_by_test_id("schedule-edit")).to_have_count(0)

    await page.goto("/#schedules")
    await row.get_by_role("button", name="Delete: Homework.").click()
    await page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    await expect(page.get_by_text("Nothing is scheduled.", exact=True)).to_be_visible()
    await expect(page.get_by_text("Create one below")).to_have_count(0)
    assert (await kim.get("/api/schedules")).json()["jobs"] == []

    # A role with scheduled prompts still gets the form.
    alice = await browser_pages.new(host.url)
    await host.member("alice")
    await sign_in(alice, "alice", MEMBER_PASSWORD)
    await alice.goto("/#schedules")
    await expect(alice.get_by_test_id("schedule-new")).to_be_visible()
    await expect(alice.get_by_test_id("schedules-not-in-role")).to_have_count(0)


async def test_a_new_prompt_runs_in_utc_like_the_assistants_until_the_browsers_zone_is_saved_in_one_click(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    page = await browser_pages.new(host.url, timezone_id="Europe/Berlin")
    await sign_in(page, "alice", MEMBER_PASSWORD)
    assert await page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone") == "Europe/Berlin"
    await page.goto("/#schedules")

    # No zone saved: the form says UTC, as the text below it and the assistant do.
    form = page.get_by_test_id("schedule-new")
    await expect(form.get_by_label("Time zone")).to_have_value("UTC")
    await expect(form).to_contain_text("UTC, as your assistant uses. A prompt saved now stays on UTC when you save your time zone below: edit its time zone then to move it.")
    zone = page.get_by_test_id("schedule-zone")
    await expect(zone.get_by_label("Time zone")).to_have_value("")
    await expect(zone).to_contain_text("new prompts use UTC until you save one (your browser says Europe/Berlin)")
    await form.get_by_label("Prompt").fill("Water the plants.")
    await form.get_by_label("When").fill("every day at 8")
    await form.get_by_role("button", name="Schedule").click()
    await expect(page.locator("tr[data-job]")).to_have_count(1)
    [made] = (await alice.get("/api/schedules")).json()["jobs"]
    assert made["timezone"] == "UTC"

    # One click saves the browser's zone as hers: the form, the text and the assistant agree.
    use = zone.get_by_role("button", name="Use Europe/Berlin")
    await use.click()
    await expect(zone.get_by_role("button", name="Use Europe/Berlin")).to_have_count(0)
    await expect(zone.get_by_label("Time zone")).to_have_value("Europe/Berlin")
    await expect(zone.get_by_label("Time zone")).to_be_focused()
    await expect(zone.locator(".form-status")).to_have_text("Time zone saved.")
    await expect(zone).to_contain_text("New scheduled prompts run in this time zone")
    await expect(form.get_by_label("Time zone")).to_have_value("Europe/Berlin")
    assert (await alice.get("/api/me/settings")).json()["settings"]["timezone"] == "Europe/Berlin"
    runtime = host.core.chat.live_runtime(alice.member["id"])
    assert await service.member_timezone(runtime.store) == "Europe/Berlin"  # what the assistant's prompts now use


async def test_a_browser_in_utc_is_offered_no_zone_to_use(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    await host.member("alice")
    page = await browser_pages.new(host.url, timezone_id="UTC")
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#schedules")
    await expect(page.get_by_test_id("schedule-new").get_by_label("Time zone")).to_have_value("UTC")
    await expect(page.get_by_test_id("schedule-zone-use-browser")).to_have_count(0)


async def test_a_role_given_scheduled_prompts_offers_the_form_at_the_next_page_without_a_reload(skald, browser_pages):
    """The shell kept the session it signed in with: a page drawn after the admin
    added the capability still said the role lacked it, until a full reload."""
    host = await skald.start()
    admin = await host.admin()
    # a role with few capabilities and the full interface: the pages under test are in it (the
    # seeded role's simple one leaves them out, see test_simple_interface.py)
    assert (await admin.patch("/api/admin/roles/restricted", json={"attrs": {"ui_mode": "full"}})).status_code == 200
    kim = await host.member("kim", role="restricted")
    page = await browser_pages.new(host.url)
    await sign_in(page, "kim", MEMBER_PASSWORD)
    await page.goto("/#schedules")
    await expect(page.get_by_test_id("schedules-not-in-role")).to_have_text(NOT_IN_ROLE)

    role = kim.member["role"]
    capabilities = next(r for r in (await admin.get("/api/admin/roles")).json()["roles"] if r["id"] == role)["capabilities"]
    async with page.expect_response(lambda r: r.url.endswith("/api/auth/session")):  # the page reads its session again
        response = await admin.patch(f"/api/admin/roles/{role}", json={"capabilities": [*capabilities, "tools.schedule"]})
        assert response.status_code == 200, response.text
    await page.get_by_role("link", name="Chat", exact=True).click()
    await page.get_by_role("link", name="Scheduled prompts", exact=True).click()
    await expect(page.get_by_test_id("schedule-new")).to_be_visible()
    await expect(page.get_by_test_id("schedules-not-in-role")).to_have_count(0)
