"""Pausing and resuming (or editing) a recurring prompt while the clocks go back does
not run a wall-clock time it already ran at a second time: resume and edit take the
runtime's own rule (``following``) from the last run. And the agent's listing says the
last run as it says the next one, in the member's local time."""

from __future__ import annotations

import datetime as dt

import pytest

from skald_host.builtins.agent_tools import _line
from skald_host.core import schedules
from skald_host.core.schedules.service import summary

UTC = dt.timezone.utc
BERLIN = "Europe/Berlin"


@pytest.fixture(autouse=True)
def reset_clock():
    yield
    schedules.clock.set(None)


async def test_resume_or_edit_in_the_repeated_hour_does_not_run_the_same_local_time_twice(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    schedules.clock.set(dt.datetime(2027, 10, 30, 12, tzinfo=UTC))
    created = await alice.post("/api/schedules", json={"prompt": "x", "every": "30 2 * * *", "timezone": BERLIN})
    assert created.status_code == 201, created.text
    job = created.json()
    fired = dt.datetime(2027, 10, 31, 0, 30, tzinfo=UTC)  # 02:30 CEST, the first 02:30 of the night
    assert job["next_run"] == schedules.iso(fired)

    # It ran: what the runtime writes (the next run skips 02:30 CET, the same wall time).
    following = schedules.following(schedules.Recurrence("30 2 * * *", BERLIN), fired, fired)
    assert following == dt.datetime(2027, 11, 1, 1, 30, tzinfo=UTC)
    db = host.core.users.owner_db(alice.member["id"])
    await db.transaction(lambda c: c.execute(
        "UPDATE scheduled_jobs SET due_at = ?, last_run_at = ?, last_status = 'done', runs = 1 WHERE id = ?",
        (schedules.iso(following), schedules.iso(fired), job["id"]),
    ))

    schedules.clock.set(dt.datetime(2027, 10, 31, 0, 40, tzinfo=UTC))
    assert (await alice.patch(f"/api/schedules/{job['id']}", json={"paused": True})).status_code == 200
    schedules.clock.set(dt.datetime(2027, 10, 31, 0, 45, tzinfo=UTC))
    resumed = await alice.patch(f"/api/schedules/{job['id']}", json={"paused": False})
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["next_run"] == schedules.iso(following)  # not 01:30Z, 02:30 CET again

    # An edit in the same hour keeps the rule too.
    schedules.clock.set(dt.datetime(2027, 10, 31, 0, 50, tzinfo=UTC))
    edited = await alice.patch(f"/api/schedules/{job['id']}", json={"every": "30 2 * * *", "prompt": "y"})
    assert edited.status_code == 200, edited.text
    assert edited.json()["next_run"] == schedules.iso(following)


def test_the_listing_says_the_last_run_in_the_same_local_form_as_the_next():
    job = {
        "id": "abcdef0123456789", "prompt": "Water the plants.", "conversation_id": "c", "cron": "30 7 * * *",
        "phrase": None, "timezone": "Asia/Tokyo", "paused": 0, "status": "pending",
        "due_at": "2026-12-07T22:30:00.000000Z", "last_run_at": "2026-12-06T22:30:04.120000Z", "last_status": "done",
        "runs": 1, "created_at": "2026-12-01T00:00:00.000Z",
    }
    line = _line(summary(job))  # a member with no zone of their own: the job's
    assert "next run 2026-12-08 07:30 (Asia/Tokyo)" in line
    assert "last done at 2026-12-07 07:30 (Asia/Tokyo)" in line
    assert "2026-12-06T22:30" not in line
