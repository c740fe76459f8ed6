"""Recovery after each unlock reads only the conversations that may have something to
resume (a scale probe: at 3,081 conversations, one of 5,000 messages, the first request
after a sign-in waited 1-1.6 s while every one was checked, its whole history loaded;
and a member's conversations past the 10,000th were never checked, so their
interrupted turns never resumed). The database names them in one read, with no limit."""

from __future__ import annotations

import os

from skald_host.core.agent.store import ConversationStore
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, eventually, messages, new_conversation


async def test_the_database_names_every_conversation_with_something_to_resume_and_only_those(tmp_path):
    db = await Database.open(tmp_path / "owner.db", key=os.urandom(32), migrations=OWNER_MIGRATIONS, create=True)
    try:
        store = ConversationStore(db)

        async def conversation() -> tuple[str, object]:
            cid, _ = await store.create_conversation("assistant")
            return cid, await store.root_frame(cid)

        answered, frame = await conversation()
        await store.add_member_message(frame, "hi", None, queued=False)
        await store.finish_assistant(await store.start_assistant(frame, "m"), content="hello", reasoning="", model="m", calls=[])
        noted, frame = await conversation()  # a note after the answer is not the last message
        await store.add_member_message(frame, "hi", None, queued=False)
        await store.finish_assistant(await store.start_assistant(frame, "m"), content="hello", reasoning="", model="m", calls=[])
        await store.add_note(frame, "a note")
        empty, _ = await conversation()
        unanswered, frame = await conversation()
        await store.add_member_message(frame, "are you there?", None, queued=False)
        cut, frame = await conversation()
        await store.add_member_message(frame, "tell me", None, queued=False)
        await store.start_assistant(frame, "m")
        await store.mark_interrupted_streams()  # what recovery does before it asks
        calling, frame = await conversation()
        await store.add_member_message(frame, "do it", None, queued=False)
        [call] = await store.finish_assistant(
            await store.start_assistant(frame, "m"), content="", reasoning="", model="m", calls=[("c1", "notify", "{}", "rerun")]
        )
        called, frame = await conversation()  # its call finished: nothing left
        await store.add_member_message(frame, "do it", None, queued=False)
        [done] = await store.finish_assistant(
            await store.start_assistant(frame, "m"), content="", reasoning="", model="m", calls=[("c2", "notify", "{}", "rerun")]
        )
        await store.set_call(done, "done", "ok")
        await store.finish_assistant(await store.start_assistant(frame, "m"), content="done", reasoning="", model="m", calls=[])
        queued, frame = await conversation()
        await store.add_member_message(frame, "hi", None, queued=False)
        await store.finish_assistant(await store.start_assistant(frame, "m"), content="hello", reasoning="", model="m", calls=[])
        await store.add_member_message(frame, "and then?", None, queued=True)
        delegating, frame = await conversation()
        await store.add_member_message(frame, "ask a helper", None, queued=False)
        [spawning] = await store.finish_assistant(
            await store.start_assistant(frame, "m"), content="", reasoning="", model="m", calls=[("c3", "execute_task", "{}", "rerun")]
        )
        await store.open_subframe(frame, spawning, "researcher")
        hidden, _ = await store.create_conversation("assistant", ephemeral=True)  # never listed, never resumed (as before)
        await store.add_member_message(await store.root_frame(hidden), "system pass", None, queued=False)
        # Past the 10,000th: the listing recovery went through stopped there.
        await db.transaction(lambda c: c.executemany(
            "INSERT INTO conversations (id, agent_id, updated_at) VALUES (?, 'assistant', '2000-01-01T00:00:00.000Z')",
            [(f"old-{n:05}",) for n in range(10_000)],
        ))
        oldest, frame = await conversation()
        await db.transaction(lambda c: c.execute("UPDATE conversations SET updated_at = '1999-01-01T00:00:00.000Z' WHERE id = ?", (oldest,)))
        await store.add_member_message(frame, "still waiting", None, queued=False)
        await db.transaction(lambda c: c.execute("UPDATE conversations SET updated_at = '1999-01-01T00:00:00.000Z' WHERE id = ?", (oldest,)))

        names = await store.conversations_to_resume()
        assert set(names) == {unanswered, cut, calling, queued, delegating, oldest}
        assert names[-1] == oldest  # newest first, as the listing was
        assert not {answered, noted, empty, called, hidden} & set(names)
        assert call  # (the unfinished call recovery re-gates)
    finally:
        await db.close()


async def test_recovery_loads_the_history_of_those_conversations_only(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("Fine.")
    finished = []
    async with ChatSocket(alice) as sock:
        for n in range(3):
            finished.append(await new_conversation(alice))
            await sock.send(finished[-1], f"hello {n}")
            await sock.turn(finished[-1])
        waiting = await new_conversation(alice)
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
    store = runtime.store
    frame = await store.root_frame(waiting)
    await store.add_member_message(frame, "answer me after the restart", None, queued=False)  # as a crash leaves it
    await runtime.chat.request_log.flush()  # recovery restores the rows the file carries: none of them twice

    loaded: list[str] = []
    listed: list[int] = []
    history, conversations = store.history, store.conversations

    async def counting_history(frame_id: str):
        loaded.append(frame_id)
        return await history(frame_id)

    async def counting_conversations(*args, **kwargs):
        listed.append(kwargs.get("limit", 0))
        return await conversations(*args, **kwargs)

    store.history, store.conversations = counting_history, counting_conversations
    assert await runtime.recover() == [waiting]
    assert listed == []  # no listing of every conversation (it stopped at 10,000)
    assert set(loaded) == {frame.id}  # the finished ones' histories are not loaded
    await eventually(lambda: _answered(alice, waiting), what="the resumed turn's answer")


async def _answered(client, conversation_id: str) -> bool:
    return any(m["role"] == "assistant" and m["status"] == "complete" for m in await messages(client, conversation_id))
