"""/stop (seed 001 "Cancellation"): it cancels the whole call tree — the HTTP stream to
the model, a running tool, an approval wait, a sub-agent — records ``cancelled`` and
leaves the conversation usable."""

from __future__ import annotations

import asyncio

from skald_hookspecs import PluginInfo, Tool, hookimpl
from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall

from .support import (
    ALL_MODELS, API_KEY, MODEL_A, ChatSocket, allow_tool, assert_well_formed, configure_models, eventually, messages, new_conversation, types,
)


async def test_stop_during_a_stream_closes_the_model_stream_and_records_the_partial_text_as_cancelled(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Hang(text="a partial answer", token_delay=0.05), Reply("A fresh answer.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Tell me a long story.")
        await sock.wait_event(cid, "token", delta=" answer")  # the last token before the hang
        assert (await sock.stop(cid)) == {"type": "stopped", "conversation_id": cid, "stopped": True}
        await chat.server.wait_for_disconnects(1)
        events = await sock.turn(cid)
        assert "cancelled" in types(events) and "done" not in types(events)

        transcript = await messages(alice, cid)
        assert [(m["role"], m["status"], m["content"]) for m in transcript] == [
            ("user", "complete", "Tell me a long story."),
            ("assistant", "cancelled", "a partial answer"),
        ]
        assert (await alice.get(f"/api/conversations/{cid}")).json()["running"] is False

        # The conversation goes on; the cancelled partial never reaches the model.
        await sock.send(cid, "Something short, then.")
        await sock.turn(cid)
    assert chat.server.requests_for(MODEL_A)[1].messages[1:] == [
        {"role": "user", "content": "Tell me a long story."},
        {"role": "user", "content": "Something short, then."},
    ]
    assert (await messages(alice, cid))[-1]["content"] == "A fresh answer."

    # The cut request may be billed all the same: the request log says it was stopped.
    async def logged() -> list:
        rows = await chat.host.core.registry.run(
            lambda c: c.execute("SELECT model, status, http_status, tokens_out FROM llm_requests ORDER BY created_at, rowid").fetchall()
        )
        return rows if len(rows) == 2 else []

    rows = [tuple(r) for r in await eventually(logged, what="two request rows")]
    assert rows[0] == (MODEL_A, "stopped", None, None) and rows[1][:3] == (MODEL_A, "ok", 200)


async def test_stop_during_a_running_tool_cancels_it_and_calls_no_model_again(chat):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "wait")
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("wait", {"text": "forever"})])])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Wait for it.")
        await asyncio.wait_for(chat.probe.waiting.wait(), 10)
        response = await alice.post(f"/api/conversations/{cid}/stop")
        assert response.status_code == 200 and response.json() == {"stopped": True}
        events = await sock.turn(cid)
    assert chat.probe.wait_cancelled == 1
    assert "tool_cancelled" in types(events) and "cancelled" in types(events)
    assert len(chat.server.requests_for(MODEL_A)) == 1
    transcript = await messages(alice, cid)
    assert transcript[1]["tool_calls"][0]["status"] == "cancelled"
    assert_well_formed(transcript)
    # Stopping what no longer runs is no error, and says so.
    assert (await alice.post(f"/api/conversations/{cid}/stop")).json() == {"stopped": False}


async def test_stop_during_an_approval_wait_cancels_the_call_and_voids_the_card(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("write_note", {"text": "x"})])])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write x.")
        card = await sock.wait_event(cid, "approval_required")
        assert (await sock.stop(cid))["stopped"] is True
        events = await sock.turn(cid)
        assert "cancelled" in types(events)
        assert (await sock.approve(card["approval_id"]))["type"] == "error"
    assert (await alice.get("/api/approvals")).json()["approvals"] == []
    assert chat.probe.writes == []
    transcript = await messages(alice, cid)
    assert transcript[1]["tool_calls"][0]["status"] == "cancelled"
    assert_well_formed(transcript)


async def test_stop_reaches_a_sub_agent_streaming_in_its_own_frame(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    delegate = Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Research slowly."})])
    chat.server.script(MODEL_A, [delegate, Hang(text="researching", token_delay=0.01)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Delegate something slow.")
        await sock.wait_event(cid, "token", depth=1)
        assert (await sock.stop(cid))["stopped"] is True
        await chat.server.wait_for_disconnects(1)
        events = await sock.turn(cid)
    assert "cancelled" in types(events)
    assert len(chat.server.requests_for(MODEL_A)) == 2  # the parent did not go on
    transcript = await messages(alice, cid)
    assert transcript[1]["tool_calls"][0]["status"] == "cancelled"
    assert_well_formed(transcript)


async def test_stop_keeps_the_queued_messages_unanswered_until_the_member_retries(chat):
    """Seed 004 §8.6: a message sent while a turn runs waits for the next turn; a Stop
    discards that turn as well — losslessly: the messages stay in the conversation,
    answered by a failure the member can retry, and no turn answers them before."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Hang(text="thinking"), Reply("Both answered.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "First.")
        await sock.wait_event(cid, "token")
        assert (await sock.send(cid, "Second."))["queued"] is True
        assert (await sock.send(cid, "Third."))["queued"] is True
        assert [q["content"] for q in (await alice.get(f"/api/conversations/{cid}")).json()["queued"]] == ["Second.", "Third."]
        assert (await sock.stop(cid))["stopped"] is True
        events = await sock.turn(cid)
        failure = next((e for e in events if e["type"] == "error"), None)
        assert failure is not None and failure["code"] == "stopped_unanswered" and failure["retry"] is True
        await asyncio.sleep(0.5)  # no turn starts for them
        assert len(chat.server.requests_for(MODEL_A)) == 1
        state = (await alice.get(f"/api/conversations/{cid}")).json()
        assert state["queued"] == [] and state["running"] is False
        assert [(m["role"], m["status"], m["content"]) for m in state["messages"]] == [
            ("user", "complete", "First."),
            ("assistant", "cancelled", "thinking"),
            ("user", "complete", "Second."),
            ("user", "complete", "Third."),
            ("assistant", "error", failure["error"]),
        ]
        assert state["messages"][-1]["id"] == failure["message_id"]
        assert state["messages"][-1]["reason"] == {"code": "stopped_unanswered", "values": {}}

        # The member's Retry answers them; the failure never reaches the model.
        assert (await alice.post(f"/api/conversations/{cid}/retry")).status_code == 202
        await sock.turn(cid)
    assert chat.server.requests_for(MODEL_A)[1].messages[1:] == [
        {"role": "user", "content": "First."},
        {"role": "user", "content": "Second."},
        {"role": "user", "content": "Third."},
    ]
    transcript = await messages(alice, cid)
    assert [m["content"] for m in transcript[2:]] == ["Second.", "Third.", "Both answered."]
    assert_well_formed(transcript)


class PoliteTool:
    """A tool that honours a stop the way an author would write it: it waits on
    ``ctx.cancelled``, catches its own cancellation, and returns a sentence."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="polite", title="Polite", spec=">=1.0,<2")

    @hookimpl
    def register_tools(self, register) -> None:
        register(Tool("ponder", "Ponder for a while.", {"type": "object", "properties": {}}, self.run))

    async def run(self, args, ctx) -> str:
        self.started.set()
        try:
            await asyncio.wait_for(ctx.cancelled.wait(), 30)
        except asyncio.CancelledError:
            pass
        return "Stopped pondering early."


async def test_stop_ends_the_turn_even_when_the_tool_catches_it_and_returns(skald, tmp_path):
    """The model is not asked again after a stop, whether the tool was cut off or
    noticed the stop and returned (it must not do better by ignoring the stop)."""
    polite = PoliteTool()
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        host = await skald.start(plugins=[polite], enable=["polite"])
        admin = await host.admin()
        await configure_models(admin, server)
        await allow_tool(admin, "ponder")
        alice = await host.member("alice")
        server.script(MODEL_A, [Reply(tool_calls=[ToolCall("ponder", {})]), Reply("after stop (should never be asked)")])
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice)
            await sock.send(cid, "Ponder.")
            await asyncio.wait_for(polite.started.wait(), 10)
            response = await alice.post(f"/api/conversations/{cid}/stop")
            assert response.json() == {"stopped": True}
            events = await sock.turn(cid)
        assert "cancelled" in types(events)
        assert len(server.requests_for(MODEL_A)) == 1
        transcript = await messages(alice, cid)
        assert transcript[1]["tool_calls"][0]["status"] == "cancelled"
        assert not any("should never be asked" in (m["content"] or "") for m in transcript)
        assert_well_formed(transcript)
        await skald.close()
