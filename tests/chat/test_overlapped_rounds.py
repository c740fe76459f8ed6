"""Rounds whose calls run before their assistant message is written: every call
``rerun``-safe and allowed outright (``Kernel._overlapped_calls``). The message, the
results and the next placeholder are written in one commit while the next request is
out, and nothing is announced before it is written; a slow call is written (as running)
and announced while it runs; a stop keeps the transcript well-formed."""

from __future__ import annotations

import json

from skald_host.core.agent import kernel
from skald_host.core.agent.store import ConversationStore
from skald_host.core.storage import StorageError
from skald_host.testing import Hang, Reply, ToolCall

from .support import (
    MODEL_A,
    PINNED,
    ChatSocket,
    allow_tool,
    assert_well_formed,
    configure_models,
    messages,
    new_conversation,
    types,
)


async def test_a_slow_read_is_written_and_shown_as_it_runs_then_its_result_follows(chat):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "wait_read")
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("Reading.", tool_calls=[ToolCall("wait_read", {"text": "a"})]), Reply("It said released.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Read it.")
        start = await sock.wait_event(cid, "tool_start")
        assert chat.probe.waiting.is_set() and not chat.probe.release.is_set()
        # Announced because written: the message is complete, its call running.
        transcript = await messages(alice, cid)
        assert transcript[1]["content"] == "Reading." and transcript[1]["status"] == "complete"
        assert [(c["id"], c["status"]) for c in transcript[1]["tool_calls"]] == [(start["call_id"], "running")]
        chat.probe.release.set()
        events = await sock.turn(cid)
    kinds = types(events)
    assert kinds.index("assistant") < kinds.index("tool_start") < kinds.index("tool_done") < kinds.index("done")
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    assert [(c["status"], c["result"]) for c in transcript[1]["tool_calls"]] == [("done", "released")]
    second = chat.server.requests_for(MODEL_A)[1]
    assert second.messages[-1] == {"role": "tool", "tool_call_id": start["call_id"], "content": "released"}


async def test_a_quick_read_is_announced_only_with_its_round_written(chat):
    """Message, call, result and the next placeholder come out of one commit: by the
    time ``assistant`` is announced the result is already stored with it."""
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "lookup")
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("lookup", {"text": "q"})]), Hang(" thinking")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Look it up.")
        done = await sock.wait_event(cid, "tool_done")
        token = await sock.wait_event(cid, "token", delta=" thinking")
        transcript = await messages(alice, cid)
        assert [(c["id"], c["status"], c["result"]) for c in transcript[1]["tool_calls"]] == [(done["call_id"], "done", "result for q")]
        assert transcript[2]["id"] == token["message_id"] and transcript[2]["status"] == "streaming"
        await sock.stop(cid)
        await sock.turn(cid)
    kinds = [e["type"] for e in sock.events]
    assert kinds.index("assistant") < kinds.index("tool_start") < kinds.index("tool_done") < kinds.index("token")
    # One commit, one burst: the round leaves in a single WebSocket message (each
    # message is a socket write on the host and a frame for the client to parse).
    bursts = [[e["data"]["type"] for e in frame.get("events") or [frame["event"]]]
              for frame in map(json.loads, sock.raw) if frame.get("type") in ("event", "events")]
    assert next(b for b in bursts if "assistant" in b)[:3] == ["assistant", "tool_start", "tool_done"]
    assert_well_formed(await messages(alice, cid))


async def test_stopping_a_read_before_it_was_written_records_the_round_as_stopped(chat, monkeypatch):
    """Stopped before anything of the round was written (a slow call not yet past
    ``SLOW_CALL_SECONDS``): the message is written then, its call ``cancelled``."""
    monkeypatch.setattr(kernel, "SLOW_CALL_SECONDS", 60.0)
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "wait_read")
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("Reading.", tool_calls=[ToolCall("wait_read", {"text": "b"})])])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Read it.")
        await chat.probe.waiting.wait()
        assert "tool_start" not in [e["type"] for e in sock.events]  # nothing written yet, nothing announced
        assert (await messages(alice, cid))[1]["status"] == "streaming"
        await sock.stop(cid)
        events = await sock.turn(cid)
    assert chat.probe.wait_cancelled == 1
    kinds = types(events)
    assert "cancelled" in kinds and kinds.index("tool_start") < kinds.index("tool_cancelled")
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    assert transcript[1]["content"] == "Reading." and transcript[1]["status"] == "complete"
    assert [c["status"] for c in transcript[1]["tool_calls"]] == ["cancelled"]


async def test_a_model_that_reuses_call_ids_every_round_gets_distinct_ones_back(chat):
    """Some models number their calls from 0 each round: the second round's call gets an
    id of its own, the same on the wire, in the events and in the file."""
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "lookup")
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("lookup", {"text": "one"}, id="call_0")]),
        Reply(tool_calls=[ToolCall("lookup", {"text": "two"}, id="call_0")]),
        Reply("Both looked up."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Look twice.")
        events = await sock.turn(cid)
    third = chat.server.requests_for(MODEL_A)[2]
    wire = [(c["id"], json.loads(c["function"]["arguments"])["text"]) for m in third.messages if m.get("tool_calls") for c in m["tool_calls"]]
    results = [m["tool_call_id"] for m in third.messages if m["role"] == "tool"]
    assert wire[0] == ("call_0", "one") and wire[1][0] != "call_0" and wire[1][1] == "two"
    assert results == [wire[0][0], wire[1][0]]
    assert [e["call_id"] for e in events if e["type"] == "tool_done"] == results
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    assert [c["id"] for m in transcript for c in m["tool_calls"]] == results


async def test_a_round_that_cannot_be_written_ends_the_turn_with_an_error_and_announces_nothing_of_it(chat, monkeypatch):
    """The one commit of a quick round fails (injected: a full disk cannot be made on
    demand here): the call that ran is not announced, the turn ends with an error, and
    the transcript stays well-formed."""

    async def failing(self, *args, **kwargs):
        raise StorageError("the disk is full (injected)")

    monkeypatch.setattr(ConversationStore, "finish_round", failing)
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "lookup")
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("lookup", {"text": "z"})]), Reply("Never shown.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Look it up.")
        events = await sock.turn(cid)
    kinds = types(events)
    assert "error" in kinds and kinds[-1] == "turn_finished" and kinds.count("turn_finished") == 1
    assert not {"assistant", "tool_start", "tool_done", "token", "done"} & set(kinds)
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    assert [(m["role"], m["status"], m["tool_calls"]) for m in transcript] == [("user", "complete", []), ("assistant", "error", [])]


async def test_a_delegate_in_such_a_round_has_its_call_written_and_announced_before_its_sub_agent_starts(chat):
    """``execute_task`` may run again after a crash (it resumes its frame), so its round
    runs before it is written; the sub-agent's frame names its call, so the call is
    written (and announced) before the frame opens."""
    await configure_models(chat.admin, chat.server, (MODEL_A, *PINNED.values()))
    alice = await chat.host.member("alice")
    chat.server.script(PINNED["alpha"], [Reply("alpha result")])
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("execute_task", {"agent": "alpha", "task": "Do it."})]), Reply("Done.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Delegate it.")
        events = await sock.turn(cid)
    kinds = types(events)
    assert kinds.index("assistant") < kinds.index("tool_start") < kinds.index("agent_start") < kinds.index("tool_done")
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    [call] = transcript[1]["tool_calls"]
    assert (call["status"], call["result"]) == ("done", "alpha result")
    assert next(e for e in events if e["type"] == "agent_start")["spawned_by_call_id"] == call["id"]
