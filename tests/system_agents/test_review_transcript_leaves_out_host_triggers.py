"""The review's transcript holds what the member said, never the hidden user rows the
host writes for the model (a background result's continuation, a steer signal): read
as the member's, they would attribute the host's words and a helper's result to them."""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pytest_asyncio

from skald_host.core.agent.store import Frame, insert_trigger
from skald_host.core.agent.subagents.coordinator import CONTINUATION_ORIGIN, STEER_ORIGIN
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.core.system_agents.timing import iso
from skald_host.core.system_agents.transcript import conversation_window, render

CID = "conversation-1"


@pytest_asyncio.fixture
async def db(tmp_path):
    database = await Database.open(tmp_path / "owner.db", key=os.urandom(32), migrations=OWNER_MIGRATIONS, create=True)
    try:
        yield database
    finally:
        await database.close()


async def test_continuation_and_steer_triggers_are_not_read_as_the_members_words(db):
    def write(conn: Any) -> None:
        conn.execute("INSERT INTO conversations (id, agent_id, title) VALUES (?, 'assistant', 'kidchat')", (CID,))
        conn.execute("INSERT INTO frames (id, conversation_id, agent_id, depth) VALUES ('root-frame', ?, 'assistant', 0)", (CID,))
        frame = Frame("root-frame", CID, None, None, "assistant", 0, "running")
        conn.execute("INSERT INTO messages (conversation_id, frame_id, role, content, status) VALUES (?, 'root-frame', 'user', 'KID MESSAGE ONE', 'complete')", (CID,))
        insert_trigger(conn, frame, "[Background updates. This message comes from the host] Result: HELPER RESULT TEXT", CONTINUATION_ORIGIN)
        insert_trigger(conn, frame, "[Signal] STEER TEXT", STEER_ORIGIN)
        conn.execute("INSERT INTO messages (conversation_id, frame_id, role, content, status) VALUES (?, 'root-frame', 'assistant', 'CONTINUATION ANSWER', 'complete')", (CID,))

    await db.transaction(write)
    now = dt.datetime.now(dt.timezone.utc)
    start, end = iso(now - dt.timedelta(days=1)), iso(now + dt.timedelta(days=1))
    rows = await db.run(lambda c: conversation_window(c, start, end))
    transcript = render(rows, "Kid")
    assert "Kid: KID MESSAGE ONE" in transcript
    assert "Assistant: CONTINUATION ANSWER" in transcript
    assert "HELPER RESULT TEXT" not in transcript
    assert "STEER TEXT" not in transcript
    assert "Background updates" not in transcript

