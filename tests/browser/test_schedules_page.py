"""The scheduled-prompts page in a real browser: create a recurring prompt from a
phrase (with its preview), see its next run, pause and resume it, edit it, delete it;
a job the agent created appears there too; and axe finds nothing, in English and German."""

from __future__ import annotations

import datetime as dt

import pytest
from playwright.async_api import expect

from skald_host.core import schedules
from skald_host.testing import Reply
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import DESKTOP, PHONE, screenshot, sign_in
from .test_accessibility import assert_no_violations
from .test_admin_forms_keyboard_and_field_errors import assert_marked


@pytest.fixture(autouse=True)
def reset_clock():
    yield
    schedules.clock.set(None)


async def test_member_schedules_pauses_edits_and_deletes_a_recurring_prompt(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    server = await skald.model_server(Reply("Here is your plan."))
    await host.use_model(server)
    alice_api = await host.member("alice")
    schedules.clock.set(dt.datetime(2026, 6, 1, 12, tzinfo=dt.timezone.utc))  # Monday 14:00 in Berlin
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.get_by_role("navigation", name="Main navigation").get_by_role("link", name="Scheduled prompts", exact=True).click()
    await expect(page.get_by_role("heading", name="Scheduled prompts", exact=True)).to_be_visible()
    await expect(page.get_by_text("Nothing is scheduled yet.")).to_be_visible()

    # Her time zone: saved in her own settings.
    zone = page.get_by_test_id("schedule-zone").get_by_label("Time zone")
    await zone.fill("Europe/Berlin")
    await page.get_by_role("button", name="Save time zone").click()
    await expect(page.get_by_test_id("schedule-zone").get_by_text("New scheduled prompts run in this time zone")).to_be_visible()
    assert (await alice_api.get("/api/me/settings")).json()["settings"]["timezone"] == "Europe/Berlin"

    # A phrase: the preview says what it means before it is saved.
    form = page.get_by_test_id("schedule-new")
    await form.get_by_label("Prompt").fill("Plan my day and tell me the weather.")
    await form.get_by_label("When").fill("every weekday at 8")
    await form.get_by_label("When").press("Tab")
    await expect(page.get_by_test_id("schedule-preview")).to_contain_text("Cron 0 8 * * 1-5")
    await form.get_by_role("button", name="Schedule").click()
    rows = page.get_by_test_id("schedule-list").locator("tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("every weekday at 8 (Europe/Berlin)")
    await expect(rows.first).to_contain_text("Not run yet")
    [job] = (await alice_api.get("/api/schedules")).json()["jobs"]
    assert (job["cron"], job["timezone"], job["paused"]) == ("0 8 * * 1-5", "Europe/Berlin", False)
    # The next run reads as Berlin's wall clock: Tuesday 08:00, whatever the browser's zone.
    await expect(rows.first.locator("[data-cell=next]")).to_contain_text("08:00")
    await expect(rows.first.locator("[data-cell=next]")).to_contain_text("Tue")
    assert job["next_run"] == "2026-06-02T06:00:00.000000Z"

    # Tuesday morning it runs; the page shows the result and Wednesday's run.
    schedules.clock.set(dt.datetime(2026, 6, 2, 6, 0, 1, tzinfo=dt.timezone.utc))
    rt = host.core.chat.live_runtime(alice_api.member["id"])
    assert await rt.deliver_due_jobs() == 1
    await page.reload()
    await expect(rows.first.locator("[data-cell=last]")).to_contain_text("Delivered")
    await expect(rows.first.locator("[data-cell=last]")).to_contain_text("08:00")  # when it ran, on Berlin's clock
    await expect(rows.first.locator("[data-cell=next]")).to_contain_text("Wed")
    await screenshot(page, "schedules-list")
    await assert_no_violations(page, "schedules")

    # Pause, then resume.
    await rows.first.get_by_role("button", name="Pause: Plan my day and tell me the weather.").click()
    await expect(rows.first.locator("[data-cell=next]")).to_have_text("Paused")
    assert (await alice_api.get("/api/schedules")).json()["jobs"][0]["paused"] is True
    await rows.first.get_by_role("button", name="Resume: Plan my day and tell me the weather.").click()
    await expect(rows.first.locator("[data-cell=next]")).not_to_have_text("Paused")

    # Edit: a new schedule, and an unreadable one is refused in her words.
    await rows.first.get_by_role("link", name="Edit: Plan my day and tell me the weather.").click()
    edit = page.get_by_test_id("schedule-edit")
    await edit.get_by_label("When").fill("every blursday at 8")
    await edit.get_by_role("button", name="Save").click()
    await expect(edit.get_by_role("status")).to_have_text("Please check “When”.")  # the reason at the field
    await expect(edit.locator(".field-error")).to_contain_text("This schedule cannot be read")
    await expect(edit.get_by_text("This schedule cannot be read")).to_have_count(1)  # the preview does not say it again
    await edit.get_by_label("When").fill("montags um 9:30")
    await edit.get_by_role("button", name="Save").click()
    await expect(rows.first).to_contain_text("montags um 9:30 (Europe/Berlin)")
    assert (await alice_api.get("/api/schedules")).json()["jobs"][0]["cron"] == "30 9 * * 1"

    # Delete, after confirming; the conversation stays.
    await rows.first.get_by_role("button", name="Delete: Plan my day and tell me the weather.").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text("will no longer run")
    await dialog.get_by_role("button", name="Delete").click()
    await expect(page.get_by_text("Nothing is scheduled yet.")).to_be_visible()
    assert (await alice_api.get("/api/schedules")).json()["jobs"] == []
    assert job["conversation_id"] in [c["id"] for c in (await alice_api.get("/api/conversations")).json()["conversations"]]


async def test_the_page_in_german_passes_axe(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    await host.create_member("berta", locale="de")
    api = await host.member("berta")
    response = await api.post("/api/schedules", json={"prompt": "Wochenplan.", "every": "werktags um 8", "timezone": "Europe/Berlin"})
    assert response.status_code == 201, response.text
    page = await browser_pages.new(host.url)  # the sign-in form in English, then her German
    await sign_in(page, "berta", MEMBER_PASSWORD)
    await page.goto("/#schedules")
    await expect(page.get_by_role("heading", name="Geplante Prompts", exact=True)).to_be_visible()
    await expect(page.get_by_test_id("schedule-list")).to_contain_text("werktags um 8 (Europe/Berlin)")
    await expect(page.get_by_role("button", name="Pausieren: Wochenplan.")).to_be_visible()
    await assert_no_violations(page, "schedules (de)")


async def test_a_refused_prompt_or_when_is_marked_named_and_focused_at_its_field(skald, browser_pages):
    """An empty prompt took the focus but was not marked wrong, and an unreadable "When"
    was a status line with the focus left on the button: each is marked at its field
    now (the API names no field for "When"; its code does)."""
    host = await skald.start()
    await host.admin()
    await host.create_member("alice")
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#schedules")
    form = page.get_by_test_id("schedule-new")
    prompt, when, status = form.get_by_label("Prompt"), form.get_by_label("When"), form.locator(".form-status")
    await form.get_by_role("button", name="Schedule").click()
    await assert_marked(page, prompt, "Write the prompt.")
    await expect(status).to_have_text("Please check “Prompt”.")
    await prompt.fill("Plan my day.")
    await form.get_by_role("button", name="Schedule").click()
    await assert_marked(page, when, "Say when it should run.")
    await expect(prompt).not_to_have_attribute("aria-invalid", "true")
    await when.fill("whenever you like")
    await form.get_by_role("button", name="Schedule").click()
    unreadable = "This schedule cannot be read. Use a phrase such as “every weekday at 8” or a cron expression such as “0 8 * * 1-5”."
    await assert_marked(page, when, unreadable)
    await expect(status).to_have_text("Please check “When”.")
    await expect(form.get_by_text("This schedule cannot be read")).to_have_count(1)  # not again in the preview
    await assert_no_violations(page, "schedules, a refused When")
    await when.fill("every weekday at 8")
    await form.get_by_role("button", name="Schedule").click()
    await expect(page.get_by_test_id("schedule-list").locator("tbody tr")).to_have_count(1)


# Each action of each row, where it is drawn, and how wide the page is.
ROW_ACTIONS = """() => ({
  width: innerWidth,
  page: document.documentElement.scrollWidth,
  actions: [...document.querySelectorAll("[data-testid=schedule-list] tbody .row-actions .btn")].map((node) => {
    const box = node.getBoundingClientRect();
    return { name: node.getAttribute("aria-label"), left: Math.round(box.left), right: Math.round(box.right) };
  }),
})"""


async def test_on_a_phone_every_row_action_is_on_the_screen(skald, browser_pages):
    """At 390 px the table ran off the screen and clipped Pause, Edit and Delete: a row
    reads as a stack there, its actions under it, with no sideways scroll."""
    host = await skald.start()
    await host.admin()
    api = await host.member("alice")
    for prompt in ("Plan my day and tell me the weather, with a long prompt that wraps.", "Weekly review."):
        response = await api.post("/api/schedules", json={"prompt": prompt, "every": "every weekday at 8", "timezone": "Europe/Berlin"})
        assert response.status_code == 201, response.text
    page = await browser_pages.new(host.url, viewport=PHONE)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#schedules")
    rows = page.get_by_test_id("schedule-list").locator("tbody tr")
    await expect(rows).to_have_count(2)
    await screenshot(page, "schedules-phone")
    drawn = await page.evaluate(ROW_ACTIONS)
    assert len(drawn["actions"]) == 6, drawn
    assert drawn["page"] <= PHONE["width"], drawn
    outside = [a for a in drawn["actions"] if a["left"] < 0 or a["right"] > PHONE["width"]]
    assert outside == [], drawn
    # They still work from there.
    plan = rows.filter(has_text="Plan my day")
    await plan.get_by_role("button", name="Pause: Plan my day").click()
    await expect(plan.locator("[data-cell=next]")).to_have_text("Paused")
    await assert_no_violations(page, "schedules (phone)")

    # On a desktop it is the table it was: one row a line, its actions side by side at the right.
    await page.set_viewport_size(DESKTOP)
    assert await page.get_by_test_id("schedule-list").evaluate("(table) => getComputedStyle(table).display") == "table"
    await expect(page.get_by_role("columnheader", name="Actions")).to_be_visible()
    drawn = await page.evaluate(ROW_ACTIONS)
    first = drawn["actions"][:3]
    assert len({a["name"].split(":")[0] for a in first}) == 3 and first[0]["right"] <= first[1]["left"] <= first[1]["right"] <= first[2]["left"], drawn


@pytest.mark.parametrize("viewport", [DESKTOP, {"width": 1366, "height": 768}], ids=["1280", "1366"])
async def test_a_prompt_of_one_long_word_wraps_and_keeps_the_actions_on_the_screen(skald, browser_pages, viewport):
    """A prompt of 300 x's grew the table to 1207 px at 1366x768 and pushed Pause, Edit
    and Delete off the screen: the prompt breaks anywhere now."""
    host = await skald.start()
    await host.admin()
    api = await host.member("alice")
    response = await api.post("/api/schedules", json={"prompt": "x" * 300, "every": "every weekday at 8", "timezone": "Europe/Berlin"})
    assert response.status_code == 201, response.text
    page = await browser_pages.new(host.url, viewport=viewport)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#schedules")
    await expect(page.get_by_test_id("schedule-list").locator("tbody tr")).to_have_count(1)
    drawn = await page.evaluate(ROW_ACTIONS)
    assert len(drawn["actions"]) == 3, drawn
    assert drawn["page"] <= viewport["width"], drawn
    assert [a for a in drawn["actions"] if a["left"] < 0 or a["right"] > viewport["width"]] == [], drawn
    table = await page.get_by_test_id("schedule-list").evaluate("(t) => [t.scrollWidth, t.parentElement.clientWidth]")
    assert table[0] <= table[1], table  # no sideways scroll in its box either
