"""A foreground run the member cancels (the Tasks strip's Cancel) ends its caller's
``execute_task`` call as an error, as a failed run's does: not ``done`` with
"Error: this run was cancelled." for its text."""

from __future__ import annotations

from typing import Any

from skald_host.testing import Hang, Reply, ToolCall

from .support import MODEL_A, ChatSocket, cancel_run, configure_models, eventually, last, messages, new_conversation

TASK = "Take your time."


def delegate_in_the_foreground(request: Any) -> Reply | Hang:
    if last(request)["content"] == TASK:
        return Hang(text="thinking")
    if last(request)["role"] == "tool":
        return Reply("The helper was stopped.")
    return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK})])


async def test_a_cancelled_foreground_run_ends_its_call_as_an_error(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = delegate_in_the_foreground
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        started = await sock.wait_event(cid, "agent_start")
        await eventually(lambda: any(last(r)["content"] == TASK for r in chat.server.requests_for(MODEL_A)), what="the run's request")
        await cancel_run(alice, sock, cid, started["run_id"])
        await sock.turn(cid)
    transcript = await messages(alice, cid)
    [call] = [c for m in transcript for c in m["tool_calls"]]
    assert (call["name"], call["status"], call["result"]) == ("execute_task", "error", "Error: this run was cancelled.")
    assert transcript[-1]["content"] == "The helper was stopped."
