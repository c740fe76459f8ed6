"""One member's chat is invisible to another (checks C1 and A4's WebSocket part): with
A's conversation and approval ids, B gets the same "not found" as for ids that never
existed — over HTTP and over the socket — nothing of A's changes, and no event of A's
turn reaches B's socket."""

from __future__ import annotations

import json
import secrets

from skald_host.testing import Reply, ToolCall

from .support import MODEL_A, ChatSocket, configure_models, messages, new_conversation

CANARY = "CANARY-" + secrets.token_hex(8)


async def owner_dump(host, member_id: str) -> dict[str, list[tuple]]:
    """Every row of every table of the member's own (encrypted) file."""
    db = host.core.users.owner_db(member_id)
    assert db is not None

    def read(conn) -> dict[str, list[tuple]]:
        # An FTS index's WITHOUT ROWID shadow tables have no rowid; their key orders them.
        tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
        order = {t: "" if "WITHOUT ROWID" in (sql or "").upper() else " ORDER BY rowid" for t, sql in tables}
        return {t: [tuple(r) for r in conn.execute(f'SELECT * FROM "{t}"{order[t]}')] for t in order}

    return await db.run(read)


async def test_member_cannot_open_read_rename_delete_continue_stop_compact_or_approve_anothers_conversation(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    bob = await chat.host.member("bob")
    chat.server.script(MODEL_A, [Reply(f"Secret {CANARY}", tool_calls=[ToolCall("write_note", {"text": CANARY})])])
    async with ChatSocket(alice) as alice_sock, ChatSocket(bob) as bob_sock:
        cid = await new_conversation(alice, title=f"Title {CANARY}")
        await alice_sock.send(cid, f"My secret is {CANARY}")
        card = await alice_sock.wait_event(cid, "approval_required")  # A's turn waits; its state is still
        aid = card["approval_id"]
        alice_before = await owner_dump(chat.host, alice.member["id"])
        bob_before = await owner_dump(chat.host, bob.member["id"])
        bob_cid = await new_conversation(bob)
        bob_before = await owner_dump(chat.host, bob.member["id"])
        nobody = secrets.token_hex(16)

        http = [
            ("GET", "/api/conversations/{}", None),
            ("PATCH", "/api/conversations/{}", {"title": "hijacked"}),
            ("DELETE", "/api/conversations/{}", None),
            ("POST", "/api/conversations/{}/messages", {"text": "continue for me", "idempotency_key": "bob-key-0001"}),
            ("POST", "/api/conversations/{}/stop", None),
            ("POST", "/api/conversations/{}/compact", None),
        ]
        for method, template, body in http:
            theirs = await bob.request(method, template.format(cid), json=body)
            unknown = await bob.request(method, template.format(nobody), json=body)
            assert theirs.status_code == 404, (method, template, theirs.text)
            assert (theirs.status_code, theirs.json()) == (unknown.status_code, unknown.json())
            assert CANARY not in theirs.text
        for decision in ("approve", "deny"):
            theirs = await bob.post(f"/api/approvals/{aid}", json={"decision": decision})
            unknown = await bob.post(f"/api/approvals/{nobody}", json={"decision": decision})
            assert theirs.status_code == 404 and theirs.json() == unknown.json()
        listing = (await bob.get("/api/conversations")).json()["conversations"]
        assert [c["id"] for c in listing] == [bob_cid]
        assert (await bob.get("/api/approvals")).json() == {"approvals": []}
        assert (await bob.get(f"/api/conversations?search={CANARY[:12]}")).json() == {"conversations": [], "next_before": None}

        # The same over the socket: a generic error, identical to an unknown id's.
        for command in (
            {"type": "send", "conversation_id": cid, "text": "continue for me"},
            {"type": "stop", "conversation_id": cid},
            {"type": "approve", "approval_id": aid, "decision": "approve"},
        ):
            theirs = await bob_sock.command(**command)
            id_field = "approval_id" if command["type"] == "approve" else "conversation_id"
            unknown = await bob_sock.command(**{**command, id_field: nobody})
            assert theirs["type"] == "error" and theirs == unknown

        assert await owner_dump(chat.host, alice.member["id"]) == alice_before
        assert await owner_dump(chat.host, bob.member["id"]) == bob_before
        assert chat.probe.writes == []

        # A's turn goes on for A alone.
        await alice_sock.approve(aid)
        chat.server.script(MODEL_A, [Reply(f"Done {CANARY}")])
        await alice_sock.turn(cid)
        assert chat.probe.writes == [{"text": CANARY}]
        await bob_sock.command(type="ping")  # B's socket has caught up with everything sent before

    assert bob_sock.events == []
    assert not any(CANARY in raw or cid in raw for raw in bob_sock.raw)
    assert any(CANARY in raw for raw in alice_sock.raw)
    assert (await messages(alice, cid))[0]["content"] == f"My secret is {CANARY}"


async def test_other_members_socket_gets_no_event_of_a_running_turn(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    bob = await chat.host.member("bob")
    chat.server.script(MODEL_A, [Reply(f"Streaming {CANARY} to alice only.", token_delay=0.005)])
    async with ChatSocket(alice) as alice_sock, ChatSocket(bob) as bob_sock:
        cid = await new_conversation(alice)
        await alice_sock.send(cid, "Hello")
        events = await alice_sock.turn(cid)
        assert sum(e["type"] == "token" for e in events) > 3
        pong = await bob_sock.command(type="ping")
        assert pong == {"type": "pong"}
    assert bob_sock.raw == [json.dumps({"type": "pong"})]
