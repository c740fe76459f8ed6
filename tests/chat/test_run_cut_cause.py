"""A background run cut by its member signing out (their file locks) is not said to
have met a server that stopped: the server went on. Its error says the member's data
was locked — and so does its call the cut ended, not "the server restarted…"; a real
shutdown still says the server stopped (``test_interrupted_run_calls``)."""

from __future__ import annotations

import skald_host.core.agent.subagents.runs as runs_module
from skald_host.core.agent.store import HOST_RESULTS

from .support import ChatSocket, eventually, member_whose_helper_waits, run, start_a_waiting_run


async def test_a_run_cut_by_a_sign_out_says_the_data_was_locked(chat):
    alice = await member_whose_helper_waits(chat)
    async with ChatSocket(alice) as sock:
        cid, row = await start_a_waiting_run(chat, alice, sock)
    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)
    again = await chat.host.member("alice")

    async def interrupted():
        detail = await run(again, row["id"])
        return detail if detail["run"]["status"] == "interrupted" else None

    detail = await eventually(interrupted, what="the run interrupted")
    assert detail["run"]["error"] != "the server stopped while this ran"
    assert detail["run"]["error"] == getattr(runs_module, "CUT_LOCKED", None)
    calls = [c for m in detail["transcript"] for c in m["tool_calls"]]
    assert [(c["name"], c["status"], c["result"]) for c in calls] == [("wait", "interrupted", HOST_RESULTS["locked"])]
