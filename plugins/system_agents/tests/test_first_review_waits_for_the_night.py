"""The first review of a member comes at the first run_at_hour after their supervisor was
named, about what was said since the naming; not at the scheduler's next pass, minutes
after it (the probe: named at 15:22, a report covering 15:22-15:30 at 15:30). An agent
turned on long after the naming waits for the night as well."""

from __future__ import annotations

import datetime as dt

from skald_host.core.system_agents import store
from skald_host.core.system_agents.timing import iso, most_recent_occurrence, parse_iso
from skald_host.testing import Reply

UTC = dt.timezone.utc
ZONE = "Europe/Berlin"  # the conftest's system_agents.time_zone
REVIEW = "# A question about homework\n\nThe member asked for help with fractions.\n\n- Conversation: chat"


def review_outcomes(outcomes):
    return [o.result for o in outcomes if o.agent_id == "conversation_review"]


def next_run_hour(after: dt.datetime, hour: int = 4) -> dt.datetime:
    return most_recent_occurrence(after + dt.timedelta(days=1), hour, ZONE)


async def name_supervisor(setup, kid, parent):
    admin = await setup.host.admin()
    put = await admin.put(f"/api/admin/members/{kid.member['id']}/supervisors", json={"supervisors": [parent.member["id"]]})
    assert put.status_code == 200, put.text


async def test_the_first_review_comes_at_the_run_hour_after_the_naming_not_at_the_next_pass(setup, skald):
    server = await skald.model_server(Reply("Sure."), Reply("Glad to help."), Reply(REVIEW))
    await setup.host.use_model(server)
    parent = await setup.host.member("parent")
    kid = await setup.host.member("kid", display_name="Kid")
    await kid.chat("before anyone supervised me: OLD-LINE")
    await name_supervisor(setup, kid, parent)
    named = parse_iso(await setup.core.registry.run(lambda c: store.supervised_since(c, kid.member["id"])))
    await kid.chat("help me with fractions: NEW-LINE")

    # The scheduler's passes until the night: nothing is due, the model is not asked.
    # Taken before the next run hour whatever the time of day the test runs at (a fixed
    # "three hours later" crossed 04:00 when run after midnight).
    night = next_run_hour(named)
    for at in (named + dt.timedelta(minutes=8), night - dt.timedelta(minutes=1)):
        setup.clock.now = min(at, night - dt.timedelta(seconds=1))
        assert review_outcomes(await setup.tick()) == ["not_due"]
    assert len(server.requests) == 2  # the two chat turns only
    assert (await parent.get("/api/reports")).json()["reports"] == []

    # The night: one review, from the naming.
    setup.clock.now = night + dt.timedelta(minutes=2)
    assert review_outcomes(await setup.tick()) == ["ran"]
    reviewed = server.requests[-1].last_user_text
    assert "NEW-LINE" in reviewed and "OLD-LINE" not in reviewed
    [report] = (await parent.get("/api/reports")).json()["reports"]
    assert report["title"] == "A question about homework"
    assert report["period_start"] == iso(named) and report["period_end"] == iso(setup.clock.now)
    assert review_outcomes(await setup.tick()) == ["not_due"]


async def test_a_review_turned_on_long_after_the_naming_waits_for_the_night(setup, skald):
    """No coverage and a naming of last month: the first pass starts the record at the
    last run hour; the first report comes the next night, about that one day."""
    server = await skald.model_server(Reply("Sure."), Reply(REVIEW))
    await setup.host.use_model(server)
    parent = await setup.host.member("parent")
    kid = await setup.host.member("kid")
    kid_id = kid.member["id"]
    await name_supervisor(setup, kid, parent)
    await kid.chat("help me with fractions: A-LINE")
    month_ago = iso(dt.datetime.now(UTC) - dt.timedelta(days=30))
    await setup.core.registry.transaction(
        lambda c: c.execute("UPDATE supervision SET created_at = ? WHERE subject_user_id = ?", (month_ago, kid_id))
    )

    setup.clock.now = dt.datetime.now(UTC) + dt.timedelta(minutes=1)
    assert review_outcomes(await setup.tick()) == ["not_due"]
    last_night = most_recent_occurrence(setup.clock.now, 4, ZONE)
    covered = await setup.core.registry.run(lambda c: store.covered_through(c, "conversation_review", kid_id))
    assert covered == iso(last_night)
    assert len(server.requests) == 1

    setup.clock.now = next_run_hour(setup.clock.now) + dt.timedelta(minutes=1)
    assert review_outcomes(await setup.tick()) == ["ran"]
    assert "A-LINE" in server.requests[-1].last_user_text
    [report] = (await parent.get("/api/reports")).json()["reports"]
    assert report["period_start"] == iso(last_night)


async def test_a_naming_whose_night_passed_without_a_pass_is_reviewed_at_the_next_pass(setup, skald):
    """Named in the evening, no pass that night (no supervisor signed in, say): the run
    hour after the naming has passed, so the first pass after it reviews, from the naming."""
    server = await skald.model_server(Reply("Sure."), Reply(REVIEW))
    await setup.host.use_model(server)
    parent = await setup.host.member("parent")
    kid = await setup.host.member("kid")
    await name_supervisor(setup, kid, parent)
    named = parse_iso(await setup.core.registry.run(lambda c: store.supervised_since(c, kid.member["id"])))
    await kid.chat("help me with fractions: A-LINE")

    setup.clock.now = next_run_hour(named) + dt.timedelta(hours=5)
    assert review_outcomes(await setup.tick()) == ["ran"]
    assert "A-LINE" in server.requests[-1].last_user_text
    [report] = (await parent.get("/api/reports")).json()["reports"]
    assert report["period_start"] == iso(named)
