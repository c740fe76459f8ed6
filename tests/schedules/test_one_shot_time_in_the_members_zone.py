"""A one-shot prompt's time as the member reads it: in their own zone, named, to the
minute (the model was told "2026-12-05T15:16:51.117172Z" for a member in Tokyo, while a
recurring prompt names the member's zone). Every job's times are told in the member's zone
(a member in Berlin read a one-shot in Berlin time beside recurring jobs in UTC)."""

from __future__ import annotations

import datetime as dt

import pytest

from skald_host.core import schedules
from skald_host.core.schedules import service

UTC = dt.timezone.utc


@pytest.fixture(autouse=True)
def reset_clock():
    yield
    schedules.clock.set(None)


def test_a_time_is_told_in_the_named_zone_to_the_minute():
    moment = dt.datetime(2026, 12, 5, 15, 16, 51, 117172, tzinfo=UTC)
    assert service.local_time(moment, "Asia/Tokyo") == "2026-12-06 00:16 (Asia/Tokyo)"
    assert service.local_time(moment, "UTC") == "2026-12-05 15:16 (UTC)"


async def test_a_one_shot_job_is_told_in_the_members_zone_else_utc(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    schedules.clock.set(dt.datetime(2026, 12, 5, 15, 6, 51, 117172, tzinfo=UTC))
    rt = await host.core.chat.runtime(await host.core.users.get(alice.member["id"]))
    conversation = await rt.create_conversation(title="reminders")
    job = await service.create(rt.store, conversation["id"], "stretch", at="2026-12-05T15:16:51.117172Z")

    assert job["next_run_local"] == "2026-12-05 15:16 (UTC)"  # no zone set
    assert (await alice.put("/api/me/settings", json={"timezone": "Asia/Tokyo"})).status_code == 200
    [listed] = await service.listing(rt.store)
    assert listed["next_run_local"] == "2026-12-06 00:16 (Asia/Tokyo)"
    # A recurring job's times are told in the member's zone too (one zone for all their
    # jobs); it keeps its own zone, on whose wall clock it runs.
    recurring = await service.create(rt.store, conversation["id"], "water", every="every day at 9", timezone="Europe/Berlin")
    assert (recurring["next_run_local"], recurring["timezone"]) == ("2026-12-06 17:00 (Asia/Tokyo)", "Europe/Berlin")
