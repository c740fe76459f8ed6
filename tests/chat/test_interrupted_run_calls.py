"""A background run stopped by a restart while one of its tool calls runs: the runs'
recovery closes its frame as interrupted, and nothing drives that frame again — so
its calls end there too, as the turn's recovery ends a call it does not run again
(``interrupted``, "the server restarted while this ran…"), none left ``running`` for
ever on the run's transcript."""

from __future__ import annotations

from skald_host.core.agent.store import HOST_RESULTS
from skald_host.testing import Reply

from .support import PROBE, ChatSocket, eventually, member_whose_helper_waits, run, start_a_waiting_run


async def test_an_interrupted_background_runs_running_call_ends_interrupted(chat, skald):
    alice = await member_whose_helper_waits(chat)
    async with ChatSocket(alice) as sock:
        cid, row = await start_a_waiting_run(chat, alice, sock)
        await sock.wait_event(cid, "tool_start", depth=1, name="wait")
    await chat.host.stop()

    chat.server.responder = lambda request: Reply("The helper was interrupted.")
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    alice = await host.member("alice")

    async def interrupted():
        detail = await run(alice, row["id"])
        return detail if detail["run"]["status"] == "interrupted" else None

    detail = await eventually(interrupted, what="the run interrupted")
    calls = [c for m in detail["transcript"] for c in m["tool_calls"]]
    assert [(c["name"], c["status"], c["result"]) for c in calls] == [("wait", "interrupted", HOST_RESULTS["restarted"])]
    assert not chat.probe.release.is_set()
