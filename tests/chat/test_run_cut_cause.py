"""A background run cut by its member signing out (their file locks) is not said to
have met a server that stopped: the server went on. Its error says the member's data
was locked — and so does its call the cut ended, not "the server restarted…"; a real
shutdown still says the server stopped (``test_interrupted_run_calls``)."""

from __future__ import annotations

import asyncio

import skald_host.core.agent.subagents.runs as runs_module
from skald_host.core.agent.store import HOST_RESULTS
from skald_host.testing import Reply, ToolCall

from .support import ChatSocket, allow_tool, configure_models, eventually, last, new_conversation, run, runs, write_agent

TASK = "Wait for it."


async def test_a_run_cut_by_a_sign_out_says_the_data_was_locked(chat):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "wait")
    write_agent(chat.probe.agents_dir, "waiter", "You wait.", title="Waiter", kind="task", allow_tools=True, tools=["wait"])
    chat.host.core.chat.subagent_catalog.reload()
    alice = await chat.host.member("alice")

    def respond(request):
        if request.messages[1].get("content") == TASK:
            return Reply(tool_calls=[ToolCall("wait", {"text": "long"})])
        if last(request)["role"] == "tool":
            return Reply("Started.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "waiter", "task": TASK, "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.turn(cid)
        await asyncio.wait_for(chat.probe.waiting.wait(), 10)
        [row] = await runs(alice, cid)
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
