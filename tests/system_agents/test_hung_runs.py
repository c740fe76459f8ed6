"""A system agent's run that hangs (``await asyncio.sleep(600)``) stalled the one scheduler,
every member's and every plugin's agents, until a restart: disabling its plugin did not
free it, its row stayed "running" and the admin was told nothing. Each run now has a time
limit (``system_agents.run_timeout_seconds``), the agents' passes run side by side, and
disabling a plugin cancels its runs; a cut-off run is failed with its reason in the run
list and a problem on the plugin's page."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.system_agents.support import Clock, CountingAgents
from tests.system_agents.test_contained_failures import Second


class Hanging(CountingAgents):
    async def run(self, ctx: Any) -> None:
        self.runs.append((ctx.member_id, ctx.subject_id))
        await asyncio.sleep(600)


async def _start(skald, timeout: float):
    hanging, second = Hanging(unit="minutes", interval=5), Second()
    settings = skald.settings(system_agents={"run": False, "run_timeout_seconds": timeout})
    host = await skald.start(plugins=[hanging, second], enable=["counting", "second"], settings=settings)
    host.core.system_agents.clock = Clock()
    return host, hanging, second


async def _runs(member, agent: str) -> list[dict[str, Any]]:
    response = await member.get("/api/system-agents/runs", params={"agent": agent})
    assert response.status_code == 200, response.text
    return response.json()["runs"]


async def test_a_run_past_its_time_limit_is_cancelled_and_listed_as_timed_out(skald):
    host, hanging, second = await _start(skald, timeout=1.0)
    alice = await host.member("alice")
    alice_id = alice.member["id"]

    outcomes = await asyncio.wait_for(host.core.system_agents.tick(), 20)

    mine = {(o.agent_id, o.result) for o in outcomes if o.member_id == alice_id}
    assert mine == {("counted", "failed"), ("second", "ran")}
    [run] = await _runs(alice, "counted")
    assert (run["status"], run["error_code"], run["error_values"]) == ("failed", "system_agent_timed_out", {"seconds": "1"})
    assert run["error"].startswith("timed out after 1 s (error id "), run["error"]
    failures = host.core.plugins.status("counting").failures
    assert any(f["where"] == "system agent counted (run)" and "timed out after 1 s" in f["traceback"] for f in failures), list(failures)


async def test_a_hung_run_holds_no_other_agent_and_disabling_its_plugin_cancels_it(skald):
    host, hanging, second = await _start(skald, timeout=600.0)
    alice = await host.member("alice")
    alice_id = alice.member["id"]
    admin = await host.admin()

    passing = asyncio.create_task(host.core.system_agents.tick())
    for _ in range(250):  # the other plugin's agent runs while the hung one hangs
        if (alice_id, None) in second.runs and hanging.runs:
            break
        await asyncio.sleep(0.02)
    assert (alice_id, None) in second.runs, "the hung agent held the other plugin's agent"
    [(hung_for, _)] = hanging.runs  # the first member's run hangs (the admin's or alice's)
    owner = alice if hung_for == alice_id else admin
    [run] = await _runs(owner, "counted")
    assert run["status"] == "running"

    off = await admin.put("/api/admin/plugins/counting/enabled", json={"enabled": False})
    assert off.status_code == 200, off.text
    await asyncio.wait_for(passing, 10)  # the pass ends: nothing hangs on

    [run] = await _runs(owner, "counted")
    assert (run["status"], run["error_code"]) == ("failed", "system_agent_cancelled"), run
    assert run["error"].startswith("cancelled: its plugin was disabled"), run["error"]
    assert len(hanging.runs) == 1  # the disabled plugin's agent runs for nobody else
    problems = (await admin.get("/api/admin/plugins/counting")).json()["failures"]
    assert any("cancelled: its plugin was disabled" in f["traceback"] for f in problems), problems
