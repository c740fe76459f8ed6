"""A member's message whose sender went away while it was being stored (the socket
closed mid-send) is still answered: its write commits in the store's thread whatever
the sender does, and a crash-kill probe found one stored and acknowledged to the resend
of its key, with its answer left streaming and no turn ever started."""

from __future__ import annotations

import asyncio

import pytest

from skald_host.testing import Reply

from .support import MODEL_A, configure_models, eventually, messages, new_conversation


async def test_a_message_stored_after_its_sender_went_away_is_still_answered(chat, monkeypatch):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    cid = await new_conversation(alice)
    member = await chat.host.core.users.get(alice.member["id"])
    runtime = await chat.host.core.chat.runtime(member)
    monkeypatch.setattr(runtime, "_room_to_write", lambda: False)  # the plain way: the turn starts after the commit
    original = runtime.store.add_member_message
    submitted, release = asyncio.Event(), asyncio.Event()

    async def held_write(*args, **kwargs):
        job = asyncio.ensure_future(original(*args, **kwargs))  # in the store's thread: it commits regardless
        submitted.set()
        await release.wait()
        return await job

    monkeypatch.setattr(runtime.store, "add_member_message", held_write)
    chat.server.script(MODEL_A, [Reply("Answered all the same.")])
    sending = asyncio.ensure_future(runtime.send(cid, "Are you there?", "key-gone-1"))
    await submitted.wait()
    sending.cancel()  # the socket's handler, cancelled as the socket closed
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await sending

    async def answered() -> bool:
        return [(m["role"], m["status"], m["content"]) for m in await messages(alice, cid)] == [
            ("user", "complete", "Are you there?"), ("assistant", "complete", "Answered all the same."),
        ]

    await eventually(answered, what="the stored message answered")
    # The resend of its key is the duplicate it is, and starts nothing twice.
    again = await runtime.send(cid, "Are you there?", "key-gone-1")
    assert again["duplicate"] is True and len(chat.server.requests_for(MODEL_A)) == 1
