"""The scheduled-prompts page writes every time one way, in one zone, and says which:
the member's, for one-off and recurring jobs alike (a member in Berlin read a one-off
in Berlin time beside recurring rows in UTC), never silently the browser's. A recurring
job's own zone, on whose wall clock it runs, stays in its "when" column."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from playwright.async_api import expect

from skald_host.core import schedules
from skald_host.core.schedules import service
from skald_host.testing import Reply
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in

BROWSER_ZONE = "America/New_York"  # 23:30 UTC on 1 June is 19:30 there
MEMBER_ZONE = "Asia/Tokyo"  # ... and 08:30 on 2 June here


@pytest.fixture(autouse=True)
def reset_clock():
    yield
    schedules.clock.set(None)


async def test_one_off_and_recurring_jobs_show_their_times_in_a_named_zone(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    server = await skald.model_server(Reply("Time for the dentist."))
    await host.use_model(server)
    alice = await host.member("alice")
    assert (await alice.put("/api/me/settings", json={"timezone": MEMBER_ZONE})).status_code == 200
    schedules.clock.set(dt.datetime(2026, 6, 1, 12, tzinfo=dt.timezone.utc))
    recurring = await alice.post("/api/schedules", json={"prompt": "Plan my day.", "every": "every day at 8", "timezone": "Europe/Berlin"})
    assert recurring.status_code == 201, recurring.text
    # A one-off job is the agent's (schedule_prompt with a time): it has no zone.
    runtime = host.core.chat.live_runtime(alice.member["id"])
    conversation = await runtime.create_conversation(title="Dentist")
    once = await service.create(runtime.store, conversation["id"], "Remind me of the dentist.", at="2026-06-01T23:30:00Z")
    assert once["timezone"] is None

    page = await browser_pages.new(host.url)
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("Emulation.setTimezoneOverride", {"timezoneId": BROWSER_ZONE})
    await sign_in(page, "alice", MEMBER_PASSWORD)
    assert await page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone") == BROWSER_ZONE
    await page.goto("/#schedules")
    one_off = page.locator(f"tr[data-job='{once['id']}']")
    daily = page.locator(f"tr[data-job='{recurring.json()['id']}']")
    await expect(one_off.locator("[data-cell=next]")).to_have_text("Tue, 6/2/2026, 08:30 AM GMT+9")
    # 08:00 in Berlin (06:00 UTC) on the member's clock, as the one-off; its schedule's zone is said beside it.
    await expect(daily.locator("[data-cell=next]")).to_have_text("Tue, 6/2/2026, 03:00 PM GMT+9")
    await expect(daily.locator("td").nth(1)).to_have_text("every day at 8 (Europe/Berlin)")

    # It runs; when it ran is on the member's clock too.
    schedules.clock.set(dt.datetime(2026, 6, 1, 23, 30, 1, tzinfo=dt.timezone.utc))
    assert await runtime.deliver_due_jobs() == 1
    await page.reload()
    [ran] = [job for job in (await alice.get("/api/schedules")).json()["jobs"] if job["id"] == once["id"]]
    at = dt.datetime.fromisoformat(ran["last_run_at"].replace("Z", "+00:00")).astimezone(ZoneInfo(MEMBER_ZONE))
    await expect(one_off.locator("[data-cell=last]")).to_have_text(f"Delivered · {at:%a}, {at.month}/{at.day}/{at.year}, {at:%I:%M %p} GMT+9")

    # The preview of a new schedule names the zone it runs in.
    form = page.get_by_test_id("schedule-new")
    await form.get_by_label("When").fill("every day at 9")
    await form.get_by_label("When").press("Tab")
    await expect(page.get_by_test_id("schedule-preview")).to_contain_text("09:00 AM GMT+9")
