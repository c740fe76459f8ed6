"""A turn ended by an unexpected exception (a bug, not a model's failure) is said to
the member, and the messages queued behind it still get their turn, in order, without
waiting for another send."""

from __future__ import annotations

from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, conversation, eventually, messages, new_conversation


async def test_messages_queued_behind_a_turn_that_failed_unexpectedly_get_their_turn(chat, monkeypatch):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    cid = await new_conversation(alice)
    runtime = chat.host.core.chat.live_runtime(alice.member["id"])
    assert runtime is not None
    chat.server.script(MODEL_A, [Reply("A slow answer.", token_delay=0.1), Reply("The queued one, answered.")])
    original = runtime.after_round
    broken = []

    async def after_round(frame, turn):
        if not broken:
            broken.append(turn)
            raise RuntimeError("a bug after the round")
        await original(frame, turn)

    monkeypatch.setattr(runtime, "after_round", after_round)
    async with ChatSocket(alice) as sock:
        await sock.send(cid, "First.")
        await sock.wait_event(cid, "token")
        await sock.send(cid, "Queued meanwhile.")
        failed = await sock.turn(cid)
        assert [e["code"] for e in failed if e["type"] == "error"] == ["turn_failed"]
        answered = await sock.turn(cid)
    assert [e["content"] for e in answered if e["type"] == "done"] == ["The queued one, answered."]
    await eventually(lambda: _idle(alice, cid), what="the conversation idle with nothing queued")
    assert [m["content"] for m in await messages(alice, cid) if m["role"] == "user"] == ["First.", "Queued meanwhile."]


async def _idle(client, cid):
    state = await conversation(client, cid)
    return not state["running"] and state["queued"] == []
