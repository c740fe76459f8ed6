"""Recovery's note "asked for again below" is written only where an answer really is
asked for again: a stream in a frame still open (the member's own answer, a foreground
sub-agent's), not one in a background run's frame the runs' recovery already closed
(probe: a background run killed mid-stream put a false note in the root conversation).
On a real SQLCipher file, through the store recovery uses."""

from __future__ import annotations

import os

from skald_host.core.agent.store import ConversationStore
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database


async def test_a_stream_in_a_closed_frame_is_interrupted_without_a_note_and_an_open_one_gets_one(tmp_path):
    db = await Database.open(tmp_path / "owner.db", key=os.urandom(32), migrations=OWNER_MIGRATIONS, create=True)
    try:
        store = ConversationStore(db)
        background, _ = await store.create_conversation("assistant", source="web", title="background")
        root = await store.root_frame(background)
        await store.add_user_message(root, "Research it in the background.", None)
        await store.finish_assistant(await store.start_assistant(root, "m"), content="Started it.", reasoning="", model="m")
        sub = await store.open_subframe(root, "call-1", "researcher")
        await store.add_user_message(sub, "the task", None)
        await store.start_assistant(sub, "m")  # streaming when the server died
        await store.close_frame(sub.id, "failed", "interrupted")  # what the runs' recovery does first

        own, _ = await store.create_conversation("assistant", source="web", title="own")
        own_root = await store.root_frame(own)
        await store.add_user_message(own_root, "Answer me.", None)
        await store.start_assistant(own_root, "m")

        resumed, given_up = await store.mark_interrupted_streams("asked again", '{"code": "answer_resumed", "values": {}}')
        assert (resumed, given_up) == ([own], [])

        async def rows(frame_id: str) -> list[tuple[str, str]]:
            return await db.run(lambda c: [tuple(r) for r in c.execute("SELECT role, status FROM messages WHERE frame_id = ? ORDER BY id", (frame_id,))])

        assert await rows(root.id) == [("user", "complete"), ("assistant", "complete")]  # no note
        assert await rows(sub.id) == [("user", "complete"), ("assistant", "interrupted")]
        assert await rows(own_root.id) == [("user", "complete"), ("assistant", "interrupted"), ("note", "complete")]
    finally:
        await db.close()
