"""What a member says to the agent stays in their own file: the registry gets request
metadata only (member, model, tokens, latency), the bodies go to the member's
encrypted file, and a canary from the conversation is in no registry byte."""

from __future__ import annotations

import sqlite3
import uuid

from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, eventually, new_conversation


async def test_request_metadata_in_the_registry_and_bodies_only_in_the_members_file(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    canary = f"CANARY-{uuid.uuid4()}"
    chat.server.script(MODEL_A, [Reply(f"I heard {canary}.")])
    async with ChatSocket(alice) as sock:
        conversation = await new_conversation(alice, title="a title that is private too " + canary)
        await sock.send(conversation, f"Please remember {canary}.")
        await sock.turn(conversation)

    database_dir = chat.host.settings.database_dir
    registry = sqlite3.connect(database_dir / "system.db")
    # The metadata row is written in the background (nothing the member sees waits for it).
    rows = await eventually(
        lambda: registry.execute("SELECT member_id, model, status, tokens_in, tokens_out, latency_ms FROM llm_requests").fetchall(),
        what="the request's metadata row",
    )
    assert [(r[0], r[1], r[2]) for r in rows] == [(alice.member["id"], MODEL_A, "ok")]
    assert rows[0][3] and rows[0][4] is not None and rows[0][5] is not None
    registry.close()
    for name in ("system.db", "system.db-wal"):
        path = database_dir / name
        if path.exists():
            assert canary.encode() not in path.read_bytes(), f"the canary reached {name}"

    owner = chat.host.core.users.owner_db(alice.member["id"])
    payloads = await owner.run(lambda c: c.execute("SELECT request, response FROM llm_request_payloads").fetchall())
    assert len(payloads) == 1 and canary in payloads[0][0] and canary in payloads[0][1]
    for path in database_dir.glob(f"{alice.member['id']}.db*"):
        assert canary.encode() not in path.read_bytes(), f"the canary is readable in {path.name}"
