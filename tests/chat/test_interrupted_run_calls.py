"""A background run stopped by a restart while one of its tool calls runs: the runs'
recovery closes its frame as interrupted, and nothing drives that frame again — so
its calls end there too, as the turn's recovery ends a call it does not run again
(``interrupted``, "the server restarted while this ran…"), none left ``running`` for
ever on the run's transcript."""

from __future__ import annotations

import asyncio

from skald_host.core.agent.store import HOST_RESULTS
from skald_host.testing import Reply, ToolCall

from .support import PROBE, ChatSocket, allow_tool, configure_models, eventually, last, new_conversation, run, runs, write_agent

TASK = "Wait for it."


async def test_an_interrupted_background_runs_running_call_ends_interrupted(chat, skald):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "wait")
    write_agent(chat.probe.agents_dir, "waiter", "You wait.", title="Waiter", kind="task", allow_tools=True, tools=["wait"])
    chat.host.core.chat.subagent_catalog.reload()
    alice = await chat.host.member("alice")

    def respond(request):
        if request.messages[1].get("content") == TASK:  # the run's own frame
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
