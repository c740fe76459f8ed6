"""The schedules API (the page's): what it refuses and why, in codes the page
translates; the member's time zone as the default; the restricted preset, which may
not schedule, can still see, pause and delete what is theirs."""

from __future__ import annotations

import datetime as dt

import pytest

from skald_host.core import schedules

UTC = dt.timezone.utc


@pytest.fixture(autouse=True)
def reset_clock():
    yield
    schedules.clock.set(None)


async def test_refusals_carry_codes_and_the_members_zone_is_the_default(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    schedules.clock.set(dt.datetime(2026, 7, 1, 12, tzinfo=UTC))  # a Wednesday in summer

    for body, code in (
        ({"prompt": "x", "every": "every blursday at 8"}, "recurrence_invalid"),
        ({"prompt": "x", "every": "* * * * *"}, "recurrence_too_often"),
        ({"prompt": "x", "every": "0,1 * * * *"}, "recurrence_too_often"),  # a minute apart, once an hour
        ({"prompt": "x", "every": "*/7 * * * *"}, "recurrence_too_often"),  # :56, then :00
        ({"prompt": "x", "every": "every day at 8", "timezone": "Mars/Olympus"}, "timezone_unknown"),
        ({"prompt": " ", "every": "every day at 8"}, "prompt_empty"),
    ):
        response = await alice.post("/api/schedules", json=body)
        assert (response.status_code, response.json().get("code")) == (400, code), body
    response = await alice.post("/api/schedules", json={"prompt": "x", "every": "every day at 8", "conversation_id": "0" * 32})
    assert response.status_code == 404
    assert (await alice.get("/api/schedules")).json() == {"jobs": [], "timezone": None}  # nothing was stored

    # No zone set: UTC. Then hers.
    preview = (await alice.post("/api/schedules/preview", json={"every": "every day at 8"})).json()
    assert preview == {"cron": "0 8 * * *", "timezone": "UTC", "next_runs": [
        "2026-07-02T08:00:00.000000Z", "2026-07-03T08:00:00.000000Z", "2026-07-04T08:00:00.000000Z"]}
    assert (await alice.put("/api/me/settings", json={"timezone": "America/New_York"})).status_code == 200
    response = await alice.post("/api/schedules", json={"prompt": "Stand-up notes.", "every": "every weekday at 9"})
    assert response.status_code == 201, response.text
    job = response.json()
    assert (job["timezone"], job["cron"], job["next_run"]) == ("America/New_York", "0 9 * * 1-5", "2026-07-01T13:00:00.000000Z")
    assert (await alice.get("/api/schedules")).json()["timezone"] == "America/New_York"
    # Its conversation was made for it, titled as the schedule's: it sits empty at the top
    # of the chat's list until the first run, and the bare prompt read as a chat nobody began.
    conversations = (await alice.get("/api/conversations")).json()["conversations"]
    assert [(c["id"], c["title"]) for c in conversations] == [(job["conversation_id"], "Scheduled: Stand-up notes.")]
    # The answer names it as the list does (it said "" until the list was read again).
    assert job["conversation_title"] == "Scheduled: Stand-up notes."
    assert (await alice.get("/api/schedules")).json()["jobs"] == [job]

    # An edit of the time zone alone keeps the schedule and moves the next run.
    response = await alice.patch(f"/api/schedules/{job['id']}", json={"timezone": "Asia/Tokyo"})
    assert response.status_code == 200, response.text
    assert (response.json()["cron"], response.json()["next_run"]) == ("0 9 * * 1-5", "2026-07-02T00:00:00.000000Z")


async def test_a_schedules_conversation_is_named_in_the_members_language(skald):
    host = await skald.start()
    await host.admin()
    berta = await host.member("berta")
    assert (await berta.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    response = await berta.post("/api/schedules", json={"prompt": "Wetter   für heute.", "every": "every day at 7"})
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["conversation_title"] == "Geplant: Wetter für heute."
    conversations = (await berta.get("/api/conversations")).json()["conversations"]
    assert [(c["id"], c["title"]) for c in conversations] == [(job["conversation_id"], "Geplant: Wetter für heute.")]


async def test_a_role_that_may_not_schedule_cannot_create_or_edit_but_can_pause_and_delete_its_own(skald):
    host = await skald.start()
    await host.admin()
    kid = await host.member("kid", role="restricted")
    response = await kid.post("/api/schedules", json={"prompt": "x", "every": "every day at 8"})
    assert response.status_code == 403
    # One made while the role allowed it (written straight into her file, as the tool would have).
    rt = await host.core.chat.runtime(await host.core.users.get(kid.member["id"]))
    conversation = await rt.create_conversation(title="old")
    from skald_host.core.schedules import service

    job = await service.create(rt.store, conversation["id"], "Homework.", every="every weekday at 16", timezone="Europe/Berlin")
    assert (await kid.patch(f"/api/schedules/{job['id']}", json={"prompt": "Play."})).status_code == 403
    response = await kid.patch(f"/api/schedules/{job['id']}", json={"paused": True})
    assert response.status_code == 200 and response.json()["paused"] is True
    assert (await kid.delete(f"/api/schedules/{job['id']}")).status_code == 200
    assert (await kid.get("/api/schedules")).json()["jobs"] == []


async def test_a_member_may_keep_a_bounded_number_of_recurring_prompts(skald, monkeypatch):
    from skald_host.core.schedules import service

    monkeypatch.setattr(service, "MAX_RECURRING", 2)  # the real bound is 100; the rule is the same
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    ids = []
    for n in range(2):
        response = await alice.post("/api/schedules", json={"prompt": f"p{n}", "every": "every day at 8"})
        assert response.status_code == 201
        ids.append(response.json()["id"])
    response = await alice.post("/api/schedules", json={"prompt": "p2", "every": "every day at 8"})
    assert (response.status_code, response.json()["code"], response.json()["values"]) == (400, "schedules_too_many", {"limit": 2})
    assert len((await alice.get("/api/conversations")).json()["conversations"]) == 2  # none made for the refused one
    assert (await alice.delete(f"/api/schedules/{ids[0]}")).status_code == 200
    assert (await alice.post("/api/schedules", json={"prompt": "p2", "every": "every day at 8"})).status_code == 201


async def test_an_unknown_time_zone_setting_is_refused_and_the_saved_one_stays(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    assert (await alice.put("/api/me/settings", json={"timezone": "Europe/Berlin"})).status_code == 200
    for bad in ("Nowhere/Land", "", 5):
        response = await alice.put("/api/me/settings", json={"timezone": bad})
        assert response.status_code == 400, bad
        assert (response.json()["code"], response.json()["field"]) == ("timezone_unknown", "timezone")
    assert (await alice.get("/api/me/settings")).json()["settings"]["timezone"] == "Europe/Berlin"
    assert (await alice.get("/api/schedules")).json()["timezone"] == "Europe/Berlin"
    assert (await alice.put("/api/me/settings", json={"timezone": None})).status_code == 200  # unsetting stays possible


async def test_a_one_off_time_in_the_past_is_refused_with_now_in_the_members_zone(skald):
    """A one-shot time more than a minute back would fire at once (a model that got the
    year wrong): refused, with a code whose values fill the en and de strings."""
    import json
    import re
    from pathlib import Path

    from skald_host.core.schedules import ScheduleError, service

    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    assert (await alice.put("/api/me/settings", json={"timezone": "Europe/Berlin"})).status_code == 200
    schedules.clock.set(dt.datetime(2026, 7, 1, 12, tzinfo=UTC))
    rt = await host.core.chat.runtime(await host.core.users.get(alice.member["id"]))
    conversation = await rt.create_conversation(title="reminders")
    with pytest.raises(ScheduleError) as refused:
        await service.create(rt.store, conversation["id"], "past prompt", at="2020-01-01T00:00:00Z")
    assert refused.value.code == "schedule_in_past"
    assert refused.value.values == {"at": "2020-01-01 01:00", "now": "2026-07-01 14:00", "timezone": "Europe/Berlin"}
    assert "in the past" in str(refused.value) and "it is now 2026-07-01 14:00 (Europe/Berlin)" in str(refused.value)
    locales = Path(service.__file__).parents[2] / "builtins" / "locales"
    for locale in ("en", "de"):
        string = json.loads((locales / f"{locale}.json").read_text())["error.schedule_in_past"]
        assert set(re.findall(r"\{(\w+)\}", string)) <= set(refused.value.values), (locale, string)
    assert await service.listing(rt.store) == []  # nothing was stored

    # Within the minute of grace ("now", a few seconds old on arrival): kept, due at once.
    job = await service.create(rt.store, conversation["id"], "now", at="2026-07-01T11:59:30Z")
    assert job["next_run"] == "2026-07-01T11:59:30.000000Z"
