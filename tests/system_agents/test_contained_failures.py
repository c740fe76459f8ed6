"""One agent's failure stays that agent's: an interval past what dates can hold (a plugin's
``interval`` field may have no maximum, as the guide's example had none) is honoured as
the longest interval instead of failing every pass, and whatever else fails in one
agent's pass leaves the agents after it their turn. An exception from ``has_work`` is a
failed run in the member's list, as one from ``run`` is."""

from __future__ import annotations

from typing import Any, Callable

from skald_hookspecs import ConfigField, ConfigSet, PluginInfo, SystemAgent, hookimpl
from tests.system_agents.support import CountingAgents, Clock, runs_in_file
from tests.system_agents.test_scheduler import NO_LOOP


class Second(CountingAgents):
    """Another plugin's agent (``second``), registered after ``counted``."""

    __name__ = "second"

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="second", title="Second", spec=">=1.3,<2")

    @hookimpl
    def register_config_sets(self, register: Callable[..., None]) -> None:
        register(ConfigSet("second", "Second", (
            ConfigField("enabled", "boolean", default=True), ConfigField("interval", "integer", default=1),
        ), owner="second"))

    @hookimpl
    def register_system_agents(self, register: Callable[..., None]) -> None:
        register(SystemAgent(id="second", title="Second", interval_seconds=86400, run=self.run, interval_unit="days"))


async def _start(skald, *plugins: Any):
    host = await skald.start(plugins=list(plugins), enable=[p.plugin_info().id for p in plugins], settings=skald.settings(system_agents=NO_LOOP))
    host.core.system_agents.clock = Clock()
    return host


async def test_an_interval_past_what_dates_hold_is_the_longest_and_fails_no_pass(skald):
    first, second = CountingAgents(unit="minutes", interval=5), Second()
    host = await _start(skald, first, second)
    alice_id = (await host.member("alice")).member["id"]
    admin = await host.admin()
    saved = await admin.put("/api/admin/settings/counted", json={"values": {"enabled": True, "interval": 10**15}})
    assert saved.status_code == 200, saved.text
    outcomes = {(o.agent_id, o.result) for o in await host.core.system_agents.tick() if o.member_id == alice_id}
    assert outcomes == {("counted", "ran"), ("second", "ran")}
    host.core.system_agents.clock.advance(days=3650)
    outcomes = {(o.agent_id, o.result) for o in await host.core.system_agents.tick() if o.member_id == alice_id}
    assert ("counted", "not_due") in outcomes and ("second", "ran") in outcomes  # ten years is the longest


async def test_a_failure_around_one_agents_pass_leaves_the_next_agent_its_turn(skald, monkeypatch, caplog):
    first, second = CountingAgents(unit="minutes", interval=5), Second()
    host = await _start(skald, first, second)
    alice_id = (await host.member("alice")).member["id"]
    registry = host.core.system_agents.registry
    real = registry.interval_for

    async def broken(entry, member_id, settings):
        if entry.id == "counted":
            raise OverflowError("the host's own arithmetic failed")
        return await real(entry, member_id, settings)

    monkeypatch.setattr(registry, "interval_for", broken)
    outcomes = {(o.agent_id, o.result) for o in await host.core.system_agents.tick() if o.member_id == alice_id}
    assert outcomes == {("counted", "failed"), ("second", "ran")}
    assert (alice_id, None) in second.runs and first.runs == []
    assert "the pass of counted for" in caplog.text


async def test_an_exception_from_has_work_is_a_failed_run_in_the_members_list(skald):
    plugin = CountingAgents(unit="minutes", interval=5)

    async def has_work(ctx: Any) -> bool:
        raise ValueError("a private detail that must not reach the run log")

    plugin.has_work = has_work  # type: ignore[method-assign]
    host = await _start(skald, plugin)
    alice = await host.member("alice")
    outcomes = [o.result for o in await host.core.system_agents.tick() if o.member_id == alice.member["id"]]
    assert outcomes == ["failed"]
    runs = await runs_in_file(host.core, alice.member["id"])
    assert [(r["agent_id"], r["status"]) for r in runs] == [("counted", "failed")]
    assert runs[0]["error"].startswith("ValueError in has_work (error id ") and "private" not in runs[0]["error"]
    listed = (await alice.get("/api/system-agents/runs")).json()["runs"]
    assert [r["status"] for r in listed] == ["failed"]


async def test_one_pass_failing_for_every_member_is_one_problem_on_the_plugins_page(skald):
    host = await _start(skald, CountingAgents(unit="minutes", interval=5, fail=True))
    alice, bob = await host.member("alice"), await host.member("bob")
    failed = [o.member_id for o in await host.core.system_agents.tick() if o.result == "failed"]
    assert {alice.member["id"], bob.member["id"]} <= set(failed)
    failures = (await (await host.admin()).get("/api/admin/plugins/counting")).json()["failures"]
    assert [(f["where"], f["members"]) for f in failures] == [("system agent counted", len(failed))]
    # Every member's run row cites the one entry the admin sees.
    for member in (alice, bob):
        (run,) = await runs_in_file(host.core, member.member["id"])
        assert run["error"] == f"RuntimeError (error id {failures[0]['error_id']})"
    assert failures[0]["passes"] == 1
    # The next pass failing the same way is counted into the same entry: an agent failing
    # every minute filled the list of 20 in 20 minutes, pushing the rest out of it.
    for _ in range(3):
        host.core.system_agents.clock.advance(days=1)
        await host.core.system_agents.tick()
    again = (await (await host.admin()).get("/api/admin/plugins/counting")).json()["failures"]
    assert [(f["error_id"], f["members"], f["passes"]) for f in again] == [(failures[0]["error_id"], 4 * len(failed), 4)]
    assert again[0]["last_at"] >= failures[0]["at"]


class TwoBugs(CountingAgents):
    """Fails with a KeyError for one member and a RuntimeError for the others."""

    def __init__(self, key_error_for: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key_error_for = key_error_for

    async def run(self, ctx: Any) -> None:
        if ctx.member_id in self.key_error_for:
            raise KeyError("a private detail")
        await super().run(ctx)


async def test_different_exceptions_in_one_pass_are_different_problems(skald):
    """One pass's fold merged a KeyError for one member and a RuntimeError for another
    into one entry with one traceback, and both run rows cited it: two bugs, one listed."""
    plugin = TwoBugs([], unit="minutes", interval=5, fail=True)
    host = await _start(skald, plugin)
    alice, bob = await host.member("alice"), await host.member("bob")
    plugin.key_error_for.append(alice.member["id"])
    await host.core.system_agents.tick()

    failures = (await (await host.admin()).get("/api/admin/plugins/counting")).json()["failures"]
    by_type = {f["traceback"].rsplit("\n", 1)[-1].split(" ")[0]: f for f in failures}
    assert set(by_type) == {"KeyError", "RuntimeError"}, [f["traceback"] for f in failures]
    (alice_run,) = await runs_in_file(host.core, alice.member["id"])
    (bob_run,) = await runs_in_file(host.core, bob.member["id"])
    assert alice_run["error"] == f"KeyError (error id {by_type['KeyError']['error_id']})"
    assert bob_run["error"] == f"RuntimeError (error id {by_type['RuntimeError']['error_id']})"
