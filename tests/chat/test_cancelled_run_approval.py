"""A helper's run cancelled (the Tasks strip's Cancel) while its call waits for the
member's approval: the approval is written expired and then announced —
``approval_resolved`` with ``expired``, as the conversation's event the page clears a
card by (web/pages/chat.js hands events of a sub-agent's depth only to its box) — so
the card does not keep live buttons whose click is refused."""

from __future__ import annotations

from skald_host.testing import Reply, ToolCall

from .support import ChatSocket, configure_models, last, new_conversation, write_agent

TASK = "Note it."


async def test_cancelling_a_run_waiting_on_an_approval_clears_its_card_live(chat):
    await configure_models(chat.admin, chat.server)
    write_agent(chat.probe.agents_dir, "noter", "You take notes.", title="Noter", kind="task", allow_tools=True, tools=["write_note"])
    chat.host.core.chat.subagent_catalog.reload()
    alice = await chat.host.member("alice")

    def respond(request):
        if request.messages[1].get("content") == TASK:  # the run's own frame
            return Reply(tool_calls=[ToolCall("write_note", {"text": "later"})])
        if last(request)["role"] == "tool":
            return Reply("The helper was stopped.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "noter", "task": TASK})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        started = await sock.wait_event(cid, "agent_start")
        card = await sock.wait_event(cid, "approval_required", depth=1)
        response = await alice.post(f"/api/agent-runs/{started['run_id']}/cancel")
        assert response.json() == {"cancelled": True}
        resolved = await sock.wait_event(cid, "approval_resolved", approval_id=card["approval_id"])
        assert resolved["decision"] == "expired"
        assert not resolved.get("depth"), resolved  # the page's top-level handler clears the card
        await sock.turn(cid)
    # Written before it was announced: the approval is expired, and a click is refused.
    response = await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})
    assert response.status_code == 409, response.text
    assert chat.probe.writes == []
