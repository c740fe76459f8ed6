"""The one scheduler (seed 000): due-ness from persisted state, run_and_record's order,
the crash sweep, locked members skipped, disabled plugins silent, the registry and the
settings sets in agreement."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

from skald_hookspecs import I18nBundle, hookimpl
from skald_host.core.system_agents import store
from skald_host.core.system_agents.registry import MAX_TICK_SECONDS, MIN_TICK_SECONDS
from skald_host.core.system_agents.timing import iso
from tests.system_agents.support import Clock, CountingAgents, NotReadyAgents, runs_in_file

NO_LOOP = {"run": False}  # the test drives the passes: nothing runs behind its back


async def start(skald, plugin, settings=None):
    host = await skald.start(plugins=[plugin], enable=["counting"], settings=settings or skald.settings(system_agents=NO_LOOP))
    clock = Clock()
    host.core.system_agents.clock = clock
    return host, clock


async def test_idle_passes_write_no_run_rows_but_advance_the_attempt(skald):
    plugin = CountingAgents(unit="minutes", interval=5)
    plugin.work = False
    host, clock = await start(skald, plugin)
    alice = await host.member("alice")
    alice_id = alice.member["id"]
    outcomes = [o for o in await host.core.system_agents.tick() if o.member_id == alice_id]
    assert [o.result for o in outcomes] == ["idle"]
    assert await runs_in_file(host.core, alice_id) == []
    db = host.core.users.owner_db(alice_id)
    assert await db.run(lambda c: store.last_attempt(c, "counted")) == iso(clock.now)
    # Not due again until the interval passed, even with work now.
    plugin.work = True
    clock.advance(minutes=4)
    assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["not_due"]
    clock.advance(minutes=2)
    assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["ran"]
    runs = await runs_in_file(host.core, alice_id)
    assert [(r["agent_id"], r["status"], r["stats"]) for r in runs] == [("counted", "done", {"seen": 1})]


async def test_a_weekly_agent_stays_due_across_a_restart(skald):
    """Due-ness is persisted, not counted from boot: a box rebooted every few days still
    runs a weekly agent, and does not run it twice after a restart."""
    settings = skald.settings(system_agents=NO_LOOP)
    plugin = CountingAgents(unit="days", interval=7)
    host, clock = await start(skald, plugin, settings)
    alice_id = (await host.member("alice")).member["id"]
    await host.core.system_agents.tick()
    assert (alice_id, None) in plugin.runs
    first = clock.now
    await host.stop()

    for days_later in (3, 6):  # reboots before the week is out: not due
        host, clock = await start(skald, plugin, settings)
        await host.member("alice")
        clock.now = first + dt.timedelta(days=days_later)
        assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["not_due"]
        await host.stop()

    host, clock = await start(skald, plugin, settings)
    await host.member("alice")
    clock.now = first + dt.timedelta(days=7, minutes=1)
    assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["ran"]
    assert plugin.runs.count((alice_id, None)) == 2


async def test_a_run_left_running_by_a_crash_is_swept_to_failed(skald):
    plugin = CountingAgents(unit="minutes", interval=5)
    host, clock = await start(skald, plugin)
    alice_id = (await host.member("alice")).member["id"]
    db = host.core.users.owner_db(alice_id)
    # What a process that died mid-pass leaves behind: an open run row, and the pass's
    # own conversation with the model.
    await db.transaction(lambda c: store.open_run(c, "counted", None, iso(clock.now)))
    await host.core.chat.runtime(await host.core.users.get(alice_id))
    await db.transaction(lambda c: c.execute("INSERT INTO conversations (id, agent_id, source, ephemeral) VALUES ('left', 'x', 'system:x', 1)"))
    await host.core.system_agents.tick()
    statuses = sorted((r["status"], r["error"] is not None) for r in await runs_in_file(host.core, alice_id))
    assert statuses == [("done", False), ("failed", True)]
    assert await db.run(lambda c: c.execute("SELECT count(*) FROM conversations").fetchone()[0]) == 0


async def test_a_run_a_stop_cut_off_is_owed_at_the_next_start_once_not_an_interval_later(skald):
    """A daily agent cut off by a restart runs at the next start, not a day later; cut
    off twice in a row (a server that dies in it), it waits for its interval."""
    settings = skald.settings(system_agents=NO_LOOP)
    plugin = CountingAgents(unit="days", interval=1)
    host, clock = await start(skald, plugin, settings)
    alice_id = (await host.member("alice")).member["id"]
    db = host.core.users.owner_db(alice_id)
    # What a stop mid-run leaves: the attempt marked, the run row still open.
    await db.transaction(lambda c: store.mark_attempt(c, "counted", iso(clock.now)))
    await db.transaction(lambda c: store.open_run(c, "counted", None, iso(clock.now)))
    clock.advance(minutes=1)
    assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["ran"]
    assert [r["status"] for r in await runs_in_file(host.core, alice_id)].count("failed") == 1

    clock.advance(days=1, minutes=1)
    await db.transaction(lambda c: store.mark_attempt(c, "counted", iso(clock.now)))
    await db.transaction(lambda c: store.open_run(c, "counted", None, iso(clock.now)))
    await host.stop()
    host, clock2 = await start(skald, plugin, settings)
    clock2.now = clock.now + dt.timedelta(minutes=1)
    await host.member("alice")
    db = host.core.users.owner_db(alice_id)
    assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["ran"]  # owed

    # Cut off, swept at the next start, and its owed run cut off again (a server that
    # dies in it): this time it waits for the day.
    for _ in range(2):
        clock2.advance(minutes=1)
        await db.transaction(lambda c: store.sweep_running(c, "counted", iso(clock2.now)))
        await db.transaction(lambda c: store.mark_attempt(c, "counted", iso(clock2.now)))
        await db.transaction(lambda c: store.open_run(c, "counted", None, iso(clock2.now)))
    clock2.advance(minutes=1)
    assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["not_due"]


async def test_a_run_a_stop_cut_off_reads_as_failed_at_once_and_a_live_one_as_running(skald):
    """The run log a member reads (through the API) never shows a run a stop cut off as
    still running until the agent's next pass sweeps it; the run in progress now does."""

    class Waiting(CountingAgents):
        def __init__(self) -> None:
            super().__init__(unit="minutes", interval=5)
            self.inside, self.go_on = asyncio.Event(), asyncio.Event()
            self.waiting_for = ""

        async def run(self, ctx):
            if ctx.member_id == self.waiting_for:
                self.inside.set()
                await self.go_on.wait()

    plugin = Waiting()
    host, clock = await start(skald, plugin)
    alice = await host.member("alice")
    plugin.waiting_for = alice.member["id"]
    db = host.core.users.owner_db(alice.member["id"])
    await db.transaction(lambda c: store.open_run(c, "counted", None, iso(clock.now)))  # what a stop leaves

    async def statuses() -> list[tuple[str, str | None]]:
        response = await alice.get("/api/system-agents/runs")
        assert response.status_code == 200, response.text
        return [(r["status"], r["error"]) for r in response.json()["runs"]]

    assert await statuses() == [("failed", store.INTERRUPTED)]
    [cut] = (await alice.get("/api/system-agents/runs")).json()["runs"]
    assert cut["error_code"] == "system_agent_interrupted"  # said in the reader's language
    clock.advance(minutes=1)
    tick = asyncio.ensure_future(host.core.system_agents.tick())
    await asyncio.wait_for(plugin.inside.wait(), 10)
    assert await statuses() == [("running", None), ("failed", store.INTERRUPTED)]
    plugin.go_on.set()
    await tick
    assert await statuses() == [("done", None), ("failed", store.INTERRUPTED)]


async def test_a_failing_run_is_recorded_without_its_message(skald):
    plugin = CountingAgents(unit="minutes", interval=5, fail=True)
    host, _ = await start(skald, plugin)
    alice_id = (await host.member("alice")).member["id"]
    await host.core.system_agents.tick()
    [run] = await runs_in_file(host.core, alice_id)
    assert run["status"] == "failed" and run["error"].startswith("RuntimeError (error id ")
    assert (run["error_code"], run["error_values"]) == (None, {})  # unexpected: no words of the host's for it
    # The admin finds its traceback on the plugin's page under that id, its message withheld.
    [failure] = [f for f in host.core.plugins.status("counting").failures if f["error_id"] in run["error"]]
    assert failure["where"] == "system agent counted"
    assert "in run" in failure["traceback"]
    assert failure["traceback"].splitlines()[-1] == "RuntimeError (message withheld: it may hold a member's data)"


async def test_locked_members_are_skipped_with_an_info_line(skald, caplog):
    plugin = CountingAgents(unit="minutes", interval=5)
    host, _ = await start(skald, plugin)
    bob = await host.create_member("bob")  # never logged in: locked
    with caplog.at_level(logging.INFO, logger="skald_host.core.system_agents.scheduler"):
        outcomes = await host.core.system_agents.tick()
    assert [o.result for o in outcomes if o.member_id == bob["id"]] == ["locked"]
    assert (bob["id"], None) not in plugin.runs
    assert any("is locked; skipped" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)


async def test_a_disabled_plugin_runs_no_agent(skald):
    plugin = CountingAgents(unit="minutes", interval=5)
    host, _ = await start(skald, plugin)
    await host.member("alice")
    await host.core.set_plugin_enabled("counting", False)
    assert await host.core.system_agents.tick() == []
    assert plugin.runs == [] and plugin.looked == []
    await host.core.set_plugin_enabled("counting", True)
    assert plugin.runs == [] and any(o.result == "ran" for o in await host.core.system_agents.tick())


async def test_the_enabled_setting_turns_one_agent_off(skald):
    plugin = CountingAgents(unit="minutes", interval=5)
    host, _ = await start(skald, plugin)
    await host.member("alice")
    await host.core.instance_settings.save("counted", {"enabled": False, "interval": 5})
    assert await host.core.system_agents.tick() == []


async def test_base_tick_is_the_shortest_interval_clamped(skald):
    plugin = CountingAgents(unit="minutes", interval=5, per_member_interval=True)
    host, _ = await start(skald, plugin)
    registry = host.core.system_agents.registry
    assert await registry.base_tick() == 300
    await host.core.instance_settings.save("counted", {"enabled": True, "interval": 600})
    assert await registry.base_tick() == MAX_TICK_SECONDS
    # A per-member override shorter than the instance value brings the wake-up forward.
    alice_id = (await host.member("alice")).member["id"]
    await host.core.registry.transaction(lambda c: store.set_member_interval(c, "counted", alice_id, 120))
    assert await registry.base_tick() == 120
    await host.core.registry.transaction(lambda c: store.set_member_interval(c, "counted", alice_id, 60))
    assert await registry.base_tick() == MIN_TICK_SECONDS


async def test_an_agent_without_its_settings_set_is_refused(skald):
    plugin = CountingAgents(with_settings=False)
    host = await skald.start(plugins=[plugin], settings=skald.settings(system_agents=NO_LOOP, plugins={"strict": False}))
    status = host.core.plugins.status("counting")
    assert status.state == "failed" and "ConfigSet with owner='counted'" in status.error
    assert host.core.system_agents.registry.entries == []


async def test_the_loop_runs_passes_on_its_own(skald):
    """With the loop on (production), a member who logs in is picked up at the next
    wake-up: a wake-up brought forward here instead of waiting a minute."""
    plugin = CountingAgents(unit="minutes", interval=5)
    host = await skald.start(plugins=[plugin], enable=["counting"])
    alice_id = (await host.member("alice")).member["id"]
    for _ in range(100):
        if (alice_id, None) in plugin.runs:
            break
        host.core.system_agents.wake.set()
        await asyncio.sleep(0.05)
    assert (alice_id, None) in plugin.runs
    assert [r["status"] for r in await runs_in_file(host.core, alice_id)] == ["done"]


async def test_enabling_the_plugin_wakes_a_scheduler_that_found_nothing_to_run(skald):
    """With no agent enabled the loop sleeps 15 minutes; enabling the agent's plugin
    from the catalog must not wait for the end of that sleep (a probe waited 5 minutes
    for a 1-minute agent's first run)."""
    plugin = CountingAgents(unit="minutes", interval=1)
    host = await skald.start(plugins=[plugin])  # the loop on, the plugin off
    alice_id = (await host.member("alice")).member["id"]
    for _ in range(40):  # the loop's first pass, which finds nothing and goes to sleep
        await asyncio.sleep(0.05)
    assert plugin.runs == [] and await host.core.system_agents.registry.base_tick() == MAX_TICK_SECONDS
    admin = await host.admin()
    enabled = await admin.put("/api/admin/plugins/counting/enabled", json={"enabled": True})
    assert enabled.status_code == 200, enabled.text
    for _ in range(200):
        if (alice_id, None) in plugin.runs:
            break
        await asyncio.sleep(0.05)
    assert (alice_id, None) in plugin.runs


class Translating(CountingAgents):
    """Counts, and says its own ``digest`` string as the pass read it, short and whole."""

    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("counting", {"en": {"digest": "Your digest"}, "de": {"digest": "Deine Übersicht"}}))

    async def run(self, ctx):
        await super().run(ctx)
        self.said = (ctx.translate("digest"), ctx.translate("counting.digest"))


async def test_an_agent_translates_its_own_keys_short_or_whole(skald):
    """``ctx.translate("digest")`` and ``ctx.translate("counting.digest")`` read the same
    string of the agent's plugin in the member's language (a plugin author wrote the
    whole key, as ``HostApi.translate`` takes it, and got "counting.counting.digest")."""
    plugin = Translating(unit="minutes", interval=5)
    host, _ = await start(skald, plugin)
    await host.member("alice", locale="de")
    await host.core.system_agents.tick()
    assert plugin.said == ("Deine Übersicht", "Deine Übersicht")


async def test_an_agent_translates_for_a_member_without_a_language_in_the_instances(skald):
    plugin = Translating(unit="minutes", interval=5)
    host, _ = await start(skald, plugin)
    await host.setup_admin(locale="de")  # the instance's language: German
    await host.member("alice")  # none of her own
    await host.core.system_agents.tick()
    assert plugin.said[0] == "Deine Übersicht"


async def test_a_member_sees_no_agent_of_a_plugin_that_is_off(skald):
    """The shell shows Reports and System agents to a member only while some agent's
    plugin runs; the admin sees every agent, to turn it on."""
    host = await skald.start(plugins=[CountingAgents()], settings=skald.settings(system_agents=NO_LOOP))  # not enabled
    admin = await host.admin()
    alice = await host.member("alice")
    assert (await alice.get("/api/system-agents")).json()["agents"] == []
    [agent] = (await admin.get("/api/system-agents")).json()["agents"]
    assert (agent["id"], agent["enabled"]) == ("counted", False)
    assert (await admin.put("/api/admin/plugins/counting/enabled", json={"enabled": True})).status_code == 200
    assert [a["id"] for a in (await alice.get("/api/system-agents")).json()["agents"]] == ["counted"]


async def test_an_enabled_plugin_that_is_not_running_is_told_apart_from_a_disabled_one(skald):
    """"Its plugin is off" sent the admin to a switch that was already on."""
    plugin = NotReadyAgents(unit="minutes", interval=5)
    host, _ = await start(skald, plugin)
    admin = await host.admin()
    alice = await host.member("alice")
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200

    [agent] = (await admin.get("/api/system-agents")).json()["agents"]
    assert (agent["plugin_enabled"], agent["plugin_running"], agent["plugin_error"]) == (True, False, "Erst ein Token setzen.")
    assert (await alice.get("/api/system-agents")).json()["agents"] == []
    assert await host.core.system_agents.tick() == [] and plugin.looked == []  # none of its agents runs

    await host.core.set_plugin_enabled("counting", False)
    [agent] = (await admin.get("/api/system-agents")).json()["agents"]
    assert (agent["plugin_enabled"], agent["plugin_running"], agent["plugin_error"]) == (False, False, None)


async def test_the_kit_runs_a_pass_now_and_moves_the_clock_for_the_next(skald):
    """``host.run_system_agents()``, for plugin authors' tests: a pass as the loop makes
    them, and ``later_by`` to find an agent that ran due again."""
    plugin = CountingAgents(unit="days", interval=7)
    host = await skald.start(plugins=[plugin], enable=["counting"], settings=skald.settings(system_agents=NO_LOOP))
    alice_id = (await host.member("alice")).member["id"]
    mine = lambda outcomes: [o.result for o in outcomes if o.member_id == alice_id]  # noqa: E731
    assert mine(await host.run_system_agents()) == ["ran"]
    assert mine(await host.run_system_agents()) == ["not_due"]
    assert mine(await host.run_system_agents(later_by=dt.timedelta(days=7, minutes=1))) == ["ran"]
    assert [member for member, _ in plugin.runs].count(alice_id) == 2


async def test_an_instance_agent_runs_once_for_the_server_whichever_admin_acts(skald):
    """Its last attempt is the server's (system.db), not the acting admin's: a second
    admin signing in while the first is signed out does not run it again (a second
    model request, a duplicate report)."""
    plugin = CountingAgents(scope="instance", unit="hours", interval=24)
    host, clock = await start(skald, plugin)
    admin_id = (await host.admin()).member["id"]
    bea_id = (await host.member("bea", role="admin")).member["id"]
    assert [(o.member_id, o.result) for o in await host.core.system_agents.tick()] == [(admin_id, "ran")]
    await host.core.users.lock(admin_id)
    clock.advance(hours=1)
    assert [(o.member_id, o.result) for o in await host.core.system_agents.tick()] == [(bea_id, "not_due")]
    assert plugin.runs == [(admin_id, None)]
    clock.advance(hours=24)
    assert [(o.member_id, o.result) for o in await host.core.system_agents.tick()] == [(bea_id, "ran")]
    # The trace stays in the acting admin's own file.
    assert [r["status"] for r in await runs_in_file(host.core, bea_id)] == ["done"]
    # A server that kept the marker only in the admin's file (before it was shared)
    # still reads it there.
    await host.core.registry.transaction(lambda c: c.execute("DELETE FROM config WHERE key LIKE 'system_agent_last_attempt:%'"))
    clock.advance(hours=1)
    assert [(o.member_id, o.result) for o in await host.core.system_agents.tick()] == [(bea_id, "not_due")]


async def test_a_member_interval_that_is_not_a_whole_number_is_refused_and_kept(skald):
    """null clears a member's interval (the server's setting); anything else that is not
    a whole number in range is a 400, the interval set before kept."""
    plugin = CountingAgents(unit="minutes", interval=5, per_member_interval=True)
    host, _ = await start(skald, plugin)
    admin = await host.admin()
    bea_id = (await host.member("bea")).member["id"]
    url = f"/api/admin/members/{bea_id}/agent-intervals"
    assert (await admin.put(url, json={"agent_id": "counted", "interval": 30})).status_code == 200
    for wrong in ("abc", "30", 1.5, 0, -3, True, [30]):
        response = await admin.put(url, json={"agent_id": "counted", "interval": wrong})
        assert response.status_code == 400, (wrong, response.text)
    assert await host.core.registry.run(lambda c: store.member_intervals(c, "counted")) == {bea_id: 30 * 60}


async def test_a_plugins_member_agent_runs_only_for_members_granted_the_plugin(skald):
    """Deny by default: a plugin's per-member agent ran (and wrote to the member's file,
    and could notify them) for a member the admin never granted the plugin (author
    probe); taken away, the grant stops it at the next pass."""
    plugin = CountingAgents(unit="minutes", interval=5)
    host, clock = await start(skald, plugin)
    admin = await host.admin()
    alice_id = (await host.member("alice")).member["id"]
    bob_id = (await host.member("bob")).member["id"]
    assert (await admin.put(f"/api/admin/members/{bob_id}/plugins", json={"plugins": []})).status_code == 200
    ran = {o.member_id: o.result for o in await host.core.system_agents.tick()}
    assert ran.get(alice_id) == "ran" and bob_id not in ran, ran
    assert alice_id in [m for m, _ in plugin.runs] and bob_id not in [m for m, _ in plugin.runs]
    assert await runs_in_file(host.core, bob_id) == []
    assert (await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": []})).status_code == 200
    clock.advance(minutes=6)
    ran = {o.member_id: o.result for o in await host.core.system_agents.tick()}
    assert alice_id not in ran and bob_id not in ran, ran
    assert [m for m, _ in plugin.runs].count(alice_id) == 1
