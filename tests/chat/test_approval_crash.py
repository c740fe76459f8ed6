"""SIGKILL right after a member approved a call, before its start was written (the
approval is spent first, the call's start written next, its tool run after that): after
the restart the approved call runs, once. It used to end as "the approval does not match
this call" and the tool never ran (found by a crash-kill run, 6 of 6).

The server is a real subprocess killed outright at the named point; the scripted model
server runs in the test process, so what it was sent spans both lives of the server."""

from __future__ import annotations

from typing import Any

from durability.helpers import Servers
from skald_host.testing import Reply, ScriptedModelServer, ToolCall

from .support import ChatSocket, assert_well_formed, eventually, member_with_models, messages, new_conversation

PASSWORD = "alice's passphrase for the approval crash test"


async def test_a_call_approved_just_before_a_kill_runs_once_after_the_restart(servers: Servers, model: ScriptedModelServer):
    server = await servers.start(crash_at="approval.after_consume")
    alice, alice_id = await member_with_models(
        server, model, PASSWORD, rule={"tool_pattern": "write_file", "action": "require", "priority": 100})

    def respond(request: Any) -> Reply:
        if request.messages[-1]["role"] == "tool":
            return Reply("Written.")
        return Reply(tool_calls=[ToolCall("write_file", {"path": "approved.txt", "content": "approved words\n"})])

    model.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write it down.")
        card = await sock.wait_event(cid, "approval_required")
        await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})
    await eventually(lambda: not server.running, what="the server to kill itself after spending the approval")
    written = servers.data_dir / "homes" / alice_id / "approved.txt"
    assert not written.exists()

    again = await servers.start()
    alice = await again.login("alice", PASSWORD)
    async with ChatSocket(alice) as sock:  # connecting resumes the member's chat
        await sock.wait_event(cid, "turn_finished", timeout=20)
    transcript = await messages(alice, cid)
    [call] = [c for m in transcript for c in m.get("tool_calls") or ()]
    assert call["status"] == "done", call
    assert written.read_text() == "approved words\n"
    assert [m["content"] for m in transcript if m["role"] == "assistant"][-1] == "Written."
    assert_well_formed(transcript)
