"""A conversation review that failed is not asked again at every pass of the scheduler
(each a billed request and a failed row): it waits an hour, doubling, at the latest
until the next night. Its coverage stays where it was (the next pass covers the window
too), and the backoff is the subject's own: another subject of the same supervisor is
reviewed as usual."""

from __future__ import annotations

import datetime as dt

from skald_host.core.system_agents import store
from skald_host.core.system_agents.timing import most_recent_occurrence
from skald_host.testing import Reply, ScriptedError

REVIEW = "# A question about homework\n\nThe member asked for help with fractions.\n\n- Conversation: chat"


def next_run_hour(after: dt.datetime, hour: int = 4) -> dt.datetime:
    return most_recent_occurrence(after + dt.timedelta(days=1), hour, "Europe/Berlin")  # the conftest's time zone


async def name_supervisor(setup, kid, parent):
    admin = await setup.host.admin()
    put = await admin.put(f"/api/admin/members/{kid.member['id']}/supervisors", json={"supervisors": [parent.member["id"]]})
    assert put.status_code == 200, put.text


def review(outcomes):
    return [(o.subject_id, o.result) for o in outcomes if o.agent_id == "conversation_review"]


async def test_a_failed_review_waits_before_the_next_attempt_and_keeps_its_coverage(setup, skald):
    server = await skald.model_server(
        Reply("Sure."), Reply("Fine."),
        ScriptedError(503, "overloaded", should_retry=False), Reply(REVIEW), Reply(REVIEW),
    )
    await setup.host.use_model(server)
    parent = await setup.host.member("parent")
    kid = await setup.host.member("kid", display_name="Kid")
    teen = await setup.host.member("teen", display_name="Teen")
    await name_supervisor(setup, kid, parent)
    await name_supervisor(setup, teen, parent)
    kid_id, teen_id = kid.member["id"], teen.member["id"]
    await kid.chat("help me with fractions")
    await teen.chat("help me with algebra")
    since = await setup.core.registry.run(lambda c: store.supervised_since(c, teen_id))

    night = next_run_hour(dt.datetime.fromisoformat(since.replace("Z", "+00:00")))
    setup.clock.now = night + dt.timedelta(minutes=2)
    assert review(await setup.tick()) == [(kid_id, "failed"), (teen_id, "ran")]
    covered = await setup.core.registry.run(lambda c: store.covered_through(c, "conversation_review", kid_id))
    asked = len(server.requests)

    # The passes of the next hour: the failed subject waits (no request), the other is done.
    for minutes in (5, 30, 59):
        setup.clock.now = night + dt.timedelta(minutes=2 + minutes)
        assert review(await setup.tick()) == [(kid_id, "not_due"), (teen_id, "not_due")]
    assert len(server.requests) == asked
    assert await setup.core.registry.run(lambda c: store.covered_through(c, "conversation_review", kid_id)) == covered

    # An hour after the failure: tried again, and the window it covers starts where it did.
    setup.clock.now = night + dt.timedelta(minutes=63)
    assert review(await setup.tick()) == [(kid_id, "ran"), (teen_id, "not_due")]
    assert "fractions" in server.requests[-1].last_user_text
    assert await setup.core.registry.run(lambda c: store.subject_retry(c, "conversation_review", kid_id)) is None
