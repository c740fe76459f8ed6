"""Two messages sent to one conversation close together, from two of the member's
clients: the second is stored behind the first and answered after it, never by a turn
of its own from a history that lacks the first. The race needs the first message to
take the plain way (stored, then its turn started: an attachment, a key not known as
new, a disk low on space); a test process holding the write lock of the member's own
file (a real second SQLCipher connection) keeps that first write in flight for certain."""

from __future__ import annotations

import asyncio

from durability.helpers import WriteLock, member_dek, owner_file
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.testing import Reply
from skald_host.testing.host import MEMBER_PASSWORD

from .support import MODEL_A, ChatSocket, configure_models, eventually, messages, new_conversation


async def own_file(chat, member) -> Database:
    """The member's own file, opened beside the server's connection with her key."""
    data_dir = chat.host.core.settings.data_dir
    dek = await member_dek(data_dir, member.member["id"], MEMBER_PASSWORD)
    return await Database.open(owner_file(data_dir, member.member["id"]), key=dek, migrations=OWNER_MIGRATIONS)


async def test_a_send_while_the_first_message_is_being_stored_queues_behind_it(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply(f"Answer to {request.last_user_text.splitlines()[0]}")
    cid = await new_conversation(alice)
    uploaded = await alice.post(f"/api/conversations/{cid}/uploads", content=b"total: 12 EUR\n",
                                headers={"X-Filename": "bill.txt", "Content-Type": "text/plain"})
    assert uploaded.status_code == 201, uploaded.text
    runtime = chat.host.core.chat.live_runtime(alice.member["id"])
    db = await own_file(chat, alice)
    try:
        async with ChatSocket(alice) as tab, ChatSocket(alice) as other_tab:
            await tab.send(cid, "Warm up.")  # the history is then kept in memory, settled
            await tab.turn(cid)
            requests = len(chat.server.requests_for(MODEL_A))
            lock = WriteLock(db)
            await lock.take()
            try:
                first = asyncio.ensure_future(
                    tab.command(type="send", conversation_id=cid, text="Here is the bill.", attachments=[uploaded.json()["path"]])
                )
                # Its write waits for the lock: the conversation counts as busy meanwhile.
                await eventually(lambda: runtime.running(cid), what="the first message's write to be in flight")
                second = asyncio.ensure_future(other_tab.send(cid, "And the total?"))
                await asyncio.sleep(0.3)
                assert len(chat.server.requests_for(MODEL_A)) == requests, "a turn started before the first message was stored"
            finally:
                await lock.release()
            first_ack, second_ack = await first, await second
            assert first_ack["type"] == second_ack["type"] == "ack", (first_ack, second_ack)
            assert first_ack["queued"] is False and second_ack["queued"] is True
            await tab.turn(cid)
            await tab.turn(cid)
    finally:
        await db.close()
    transcript = [(m["role"], m["content"]) for m in await messages(alice, cid)]
    assert transcript[2:] == [
        ("user", "Here is the bill."), ("assistant", "Answer to Here is the bill."),
        ("user", "And the total?"), ("assistant", "Answer to And the total?"),
    ]
    first_request, second_request = chat.server.requests_for(MODEL_A)[requests:]
    asked = [m["content"].splitlines()[0] for m in second_request.messages if m["role"] == "user"]
    assert asked[-2:] == ["Here is the bill.", "And the total?"]
    assert first_request.messages[-1]["role"] == "user" and "And the total?" not in str(first_request.messages)


async def test_a_send_while_a_regenerate_is_being_stored_queues_behind_it(chat):
    """The same for a regenerate: its new answer comes first, then the message."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    answers = iter(["First answer.", "Second answer.", "Answer to the next."])
    chat.server.responder = lambda request: Reply(next(answers))
    cid = await new_conversation(alice)
    runtime = chat.host.core.chat.live_runtime(alice.member["id"])
    db = await own_file(chat, alice)
    try:
        async with ChatSocket(alice) as tab:
            await tab.send(cid, "A question.")
            await tab.turn(cid)
            lock = WriteLock(db)
            await lock.take()
            try:
                regenerated = asyncio.ensure_future(alice.post(f"/api/conversations/{cid}/regenerate"))
                await eventually(lambda: runtime.running(cid), what="the regenerate's write to be in flight")
                sent = asyncio.ensure_future(tab.send(cid, "The next one."))
                await asyncio.sleep(0.3)
                assert len(chat.server.requests_for(MODEL_A)) == 1, "a turn started before the regenerate was stored"
            finally:
                await lock.release()
            assert (await regenerated).status_code == 202
            ack = await sent
            assert ack["type"] == "ack" and ack["queued"] is True, ack
            await tab.turn(cid)
            await tab.turn(cid)
    finally:
        await db.close()
    transcript = [(m["role"], m["content"]) for m in await messages(alice, cid) if not m["variant"]]  # the shown version
    assert transcript == [
        ("user", "A question."), ("assistant", "Second answer."), ("user", "The next one."), ("assistant", "Answer to the next."),
    ]
