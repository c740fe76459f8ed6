"""The round limit counts model requests (README ``chat.max_rounds``: "model rounds per
turn"; a definition's ``limits.max_iterations`` for a sub-agent's run): N rounds are N
requests to the model, whatever restart policy the tools it calls have — a ``rerun``
tool runs overlapped with its round, any other in a pass of its own, and neither may
cost a round. The calls of the last allowed round are not started (their results would
reach no model): each is closed, none is left running, and the note says how many
rounds there were."""

from __future__ import annotations

import pytest

from skald_host.core.agent.store import HOST_RESULTS
from skald_host.testing import Reply, ToolCall

from .support import (
    MODEL_A,
    ChatSocket,
    allow_tool,
    configure_models,
    new_conversation,
    run,
    runs,
    stored_messages,
    write_agent,
)

STOPPED = "Stopped after {} rounds without a final answer."


def calls_of(rows: list[dict]) -> list[dict]:
    return [c for m in rows if m["role"] == "assistant" for c in (m.get("tool_calls") or [])]


@pytest.mark.parametrize("chat_settings", [{"chat": {"max_rounds": 4}}])
@pytest.mark.parametrize("tool", ["lookup", "write_note"])  # restart "rerun" (overlapped), "mark_interrupted"
async def test_max_rounds_is_the_number_of_model_requests_for_any_tool(chat, tool):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, tool)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply(tool_calls=[ToolCall(tool, {"text": "more"})])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Keep going.")
        events = await sock.turn(cid)
    assert len(chat.server.requests_for(MODEL_A)) == 4
    rows = await stored_messages(alice, cid)
    assert rows[-1]["role"] == "note" and rows[-1]["content"] == STOPPED.format(4)
    assert any(e["type"] == "error" and e.get("values") == {"rounds": 4} for e in events)
    calls = calls_of(rows)
    assert len(calls) == 4
    # Each round's calls but the last ran, and the model saw their results.
    assert [c["status"] for c in calls[:3]] == ["done"] * 3
    last_request = chat.server.requests_for(MODEL_A)[-1]
    assert len([m for m in last_request.messages if m["role"] == "tool"]) == 3
    # The last round's call did not start: it is closed, not left running.
    assert (calls[3]["status"], calls[3]["result"]) == ("cancelled", HOST_RESULTS["round_limit"]), calls[3]
    # Announced as it was written, before the note that ends the turn.
    closed = next(i for i, e in enumerate(events) if e["type"] == "tool_cancelled" and e["call_id"] == calls[3]["id"])
    assert events[closed]["result_code"] == "round_limit"
    assert closed < next(i for i, e in enumerate(events) if e["type"] == "error")
    assert not any(e["type"] == "tool_start" and e["call_id"] == calls[3]["id"] for e in events)
    if tool == "write_note":
        assert len(chat.probe.writes) == 3


@pytest.mark.parametrize("tool", ["lookup", "write_note"])
async def test_a_runs_max_iterations_is_the_number_of_its_model_requests(chat, tool):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, tool)
    write_agent(chat.probe.agents_dir, "looper", "You look things up.", title="Looper", kind="task", allow_tools=True,
                tools=[tool], limits={"max_iterations": 3})
    chat.host.core.chat.subagent_catalog.reload()
    alice = await chat.host.member("alice")
    task = "Loop on it."

    def respond(request):
        if request.messages[1].get("content") == task:  # the run's own frame
            return Reply(tool_calls=[ToolCall(tool, {"text": "more"})])
        if request.messages[-1]["role"] == "tool":
            return Reply("The helper stopped.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "looper", "task": task})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask the looper.")
        await sock.turn(cid)
    looper = [r for r in chat.server.requests_for(MODEL_A) if r.messages[1].get("content") == task]
    assert len(looper) == 3
    [row] = await runs(alice, cid)
    detail = await run(alice, row["id"])
    assert detail["run"]["status"] == "failed" and detail["run"]["error"] == STOPPED.format(3), detail["run"]
    calls = [c for m in detail["transcript"] for c in m["tool_calls"]]
    assert [c["status"] for c in calls] == ["done", "done", "cancelled"], calls  # the last round's call never started
    assert calls[-1]["result"] == HOST_RESULTS["round_limit"]
    if tool == "write_note":
        assert len(chat.probe.writes) == 2
