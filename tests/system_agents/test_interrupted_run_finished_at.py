"""A run a stop cut off (its row left ``running`` by a crash) ended before this process
began: it reads failed with that time as its end at once, and the agent's next pass,
which sweeps it, writes that time too — not the pass's own start, which would make a
run cut after a moment look as if it had run until then."""

from __future__ import annotations

import datetime as dt

from skald_host.core.system_agents.timing import iso, parse_iso, system_clock
from tests.system_agents.support import CountingAgents, runs_in_file
from tests.system_agents.test_scheduler import NO_LOOP, start


async def test_an_interrupted_run_ends_when_the_server_came_back_not_at_the_next_pass(skald):
    plugin = CountingAgents(unit="minutes", interval=5)
    host, clock = await start(skald, plugin, skald.settings(system_agents=NO_LOOP))
    alice_id = (await host.member("alice")).member["id"]
    db = host.core.users.owner_db(alice_id)
    began = parse_iso(host.core.system_agents._began)
    cut = iso(began.replace(microsecond=0) - dt.timedelta(minutes=1))
    await db.transaction(lambda c: c.execute(
        "INSERT INTO system_agent_runs (id, agent_id, status, started_at) VALUES ('cut', 'counted', 'running', ?)", (cut,)
    ))
    [row] = [r for r in await runs_in_file(host.core, alice_id) if r["id"] == "cut"]
    assert row["status"] == "failed" and row["finished_at"] is not None
    shown = row["finished_at"]
    assert cut <= shown <= iso(system_clock())
    clock.advance(minutes=30)  # the next pass comes long after
    assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["ran"]
    [row] = [r for r in await runs_in_file(host.core, alice_id) if r["id"] == "cut"]
    assert (row["status"], row["finished_at"]) == ("failed", shown)
