"""A pass that failed is tried again after a backoff (an hour, doubling, never later
than the interval), not at every pass nor a week later; a pass that found no work does
not start the interval (work that appears after it is done within the re-check), and
asks ``has_work`` no more often than that re-check."""

from __future__ import annotations

from tests.system_agents.support import CountingAgents
from tests.system_agents.test_scheduler import NO_LOOP, start


async def _result(host, member_id):
    return [o.result for o in await host.core.system_agents.tick() if o.member_id == member_id]


async def test_a_failed_weekly_run_is_retried_after_a_backoff_not_a_week_later(skald):
    plugin = CountingAgents(unit="days", interval=7, fail=True)
    host, clock = await start(skald, plugin, skald.settings(system_agents=NO_LOOP))
    alice_id = (await host.member("alice")).member["id"]
    assert await _result(host, alice_id) == ["failed"]
    clock.advance(minutes=5)
    assert await _result(host, alice_id) == ["not_due"]  # not at every pass
    clock.advance(minutes=56)
    assert await _result(host, alice_id) == ["failed"]  # an hour later, not a week
    clock.advance(hours=1, minutes=30)
    assert await _result(host, alice_id) == ["not_due"]  # then two hours
    clock.advance(minutes=31)
    plugin.fail = False
    assert await _result(host, alice_id) == ["ran"]
    # A run that succeeded waits the interval.
    clock.advance(days=6, hours=23)
    assert await _result(host, alice_id) == ["not_due"]
    clock.advance(hours=2)
    assert await _result(host, alice_id) == ["ran"]
    assert plugin.runs.count((alice_id, None)) == 4


async def test_an_idle_pass_does_not_start_the_interval_and_rechecks_sparingly(skald):
    plugin = CountingAgents(unit="days", interval=7)
    plugin.work = False
    host, clock = await start(skald, plugin, skald.settings(system_agents=NO_LOOP))
    alice_id = (await host.member("alice")).member["id"]
    assert await _result(host, alice_id) == ["idle"]
    looked = plugin.looked.count(alice_id)
    # has_work is not asked at every pass of the scheduler...
    clock.advance(minutes=5)
    assert await _result(host, alice_id) == ["not_due"]
    assert plugin.looked.count(alice_id) == looked
    # ...and the member who starts using it now is served within the hour, not a week.
    plugin.work = True
    clock.advance(minutes=56)
    assert await _result(host, alice_id) == ["ran"]
    assert plugin.runs.count((alice_id, None)) == 1


async def test_a_failed_instance_pass_backs_off_for_the_whole_server(skald):
    plugin = CountingAgents(scope="instance", unit="days", interval=7, fail=True)
    host, clock = await start(skald, plugin, skald.settings(system_agents=NO_LOOP))
    admin_id = (await host.admin()).member["id"]
    bea_id = (await host.member("bea", role="admin")).member["id"]
    assert [(o.member_id, o.result) for o in await host.core.system_agents.tick()] == [(admin_id, "failed")]
    await host.core.users.lock(admin_id)
    clock.advance(minutes=5)
    assert [(o.member_id, o.result) for o in await host.core.system_agents.tick()] == [(bea_id, "not_due")]
    clock.advance(hours=1)
    assert [(o.member_id, o.result) for o in await host.core.system_agents.tick()] == [(bea_id, "failed")]
