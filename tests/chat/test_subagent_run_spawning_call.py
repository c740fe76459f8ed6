"""What the chat rebuilds a working sub-agent's box from after a reload: a run row names
its frame and the call that started it, and its detail holds the text it is writing
(as last checkpointed) — for its member only."""

from __future__ import annotations

from skald_host.testing import Hang, Reply, ToolCall

from .support import MODEL_A, ChatSocket, configure_models, eventually, new_conversation


async def test_a_running_sub_agents_row_names_its_spawning_call_and_its_detail_holds_the_partial_text(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    bob = await chat.host.member("bob")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Capital of Norway?"})]),
        Hang(text="Oslo, most likely"),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask the researcher.")
        start = await sock.wait_event(cid, "agent_start")
        assert start["spawned_by_call_id"]

        response = await alice.get(f"/api/conversations/{cid}/runs?strip=1")
        assert response.status_code == 200, response.text
        [row] = response.json()["runs"]
        assert (row["status"], row["frame_id"], row["spawned_by_call_id"]) == ("running", start["frame_id"], start["spawned_by_call_id"])

        async def partial() -> dict | None:
            detail = (await alice.get(f"/api/agent-runs/{row['id']}")).json()
            streaming = [m for m in detail["transcript"] if m["role"] == "assistant" and m["status"] == "streaming"]
            return detail if streaming and streaming[0]["content"] == "Oslo, most likely" else None

        detail = await eventually(partial, what="the sub-agent's streaming text checkpointed")
        assert detail["run"]["spawned_by_call_id"] == start["spawned_by_call_id"]
        assert detail["run"]["frame_id"] == start["frame_id"]

        # Another member learns nothing of it: not the conversation's runs, not the run.
        assert (await bob.get(f"/api/conversations/{cid}/runs?strip=1")).status_code == 404
        assert (await bob.get(f"/api/agent-runs/{row['id']}")).status_code == 404

        assert (await alice.post(f"/api/conversations/{cid}/stop")).status_code == 200
        await sock.turn(cid)
