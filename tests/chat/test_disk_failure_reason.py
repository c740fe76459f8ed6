"""A turn the disk stopped keeps its reason (crash probe 3): the stored answer said
``error`` with no text and no reason, so a reload or a restart showed a bare failed
bubble, while only the live event had said why.

The round's last write is made to fail by raising the store's own ``DiskFull`` from
``finish_assistant`` (a stand-in: a real full disk refuses the settling write too,
and a file-size limit that refuses one write and takes the next cannot be set up
deterministically here; tests/durability/test_disk_full.py fills a real tmpfs)."""

from __future__ import annotations

from skald_host.core.storage.errors import DiskFull
from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, messages, new_conversation


async def test_a_turn_the_disk_stopped_is_stored_with_its_reason(chat, monkeypatch):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    conversation_id = await new_conversation(alice)
    chat.server.script(MODEL_A, [Reply("")])
    store = (await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))).store

    async def refused(*args, **kwargs):
        raise DiskFull("the disk is full: (test) could not be written")

    monkeypatch.setattr(store, "finish_assistant", refused)
    async with ChatSocket(alice) as socket:
        assert (await socket.send(conversation_id, "Hello?"))["type"] == "ack"
        events = await socket.turn(conversation_id)
    [error] = [e for e in events if e["type"] == "error"]
    assert error["code"] == "disk_full", error
    [answer] = [m for m in await messages(alice, conversation_id) if m["role"] == "assistant"]
    assert answer["status"] == "error" and answer["reason"]["code"] == "disk_full", answer
