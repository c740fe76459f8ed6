"""A Stop while a call of a sequential round waits for approval ends every call of the
round not finished yet, those queued behind it too: none is left ``requested`` (a grey
"Waiting" badge for ever, and "never finished" for the model next turn), also not after
a restart."""

from __future__ import annotations

from skald_host.testing import Reply, ToolCall

from .support import MODEL_A, PROBE, ChatSocket, allow_tool, assert_well_formed, configure_models, messages, new_conversation


async def test_a_stop_ends_the_calls_queued_behind_the_waiting_one(chat, skald):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "lookup")
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply(tool_calls=[
        ToolCall("lookup", {"text": "x"}), ToolCall("write_note", {"text": "one"}), ToolCall("write_note", {"text": "two"}),
    ])])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Look up and write twice.")
        await sock.wait_event(cid, "approval_required")
        assert (await alice.post(f"/api/conversations/{cid}/stop")).json() == {"stopped": True}
        await sock.wait_event(cid, "turn_finished")

    def calls(transcript):
        return [(c["name"], c["status"], c["result"]) for c in transcript[1]["tool_calls"]]

    expected = [("lookup", "done", "result for x"), ("write_note", "cancelled", "stopped"), ("write_note", "cancelled", "stopped")]
    stopped = await messages(alice, cid)
    assert calls(stopped) == expected
    assert_well_formed(stopped)
    assert not (await alice.get(f"/api/conversations/{cid}")).json().get("running")
    assert chat.probe.writes == []

    await chat.host.stop()
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    alice = await host.member("alice")
    assert calls(await messages(alice, cid)) == expected
    assert chat.probe.writes == []
