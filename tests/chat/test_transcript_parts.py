"""A long conversation is read a part at a time: GET /api/conversations/<id> gives the
newest whole turns (about what the page draws first), a cursor for the part before, the
part after, and the part around a message or a search hit; ``all=1`` the whole, as before
parts. A part never cuts a turn (a call from its result, an answer from its versions)."""

from __future__ import annotations

import json
from typing import Any

import skald_host.web.routes.chat as chat_routes
from skald_host.core.agent.store import ConversationStore

TURNS = 400


async def seed(host: Any, member_id: str) -> tuple[str, dict[str, int]]:
    """A conversation of TURNS turns (question, an answer that calls a tool, the answer);
    turn 10's answer regenerated (its earlier version kept), turn 250's question holds
    "needle"; the ids of those rows."""
    db = host.core.users.owner_db(member_id)
    store = ConversationStore(db)
    conversation_id, _ = await store.create_conversation("assistant", title="Long")
    frame = (await store.root_frame(conversation_id)).id
    marks: dict[str, int] = {}

    def write(conn: Any) -> None:
        def row(role: str, content: str, **extra: Any) -> int:
            columns = ["conversation_id", "frame_id", "role", "content", "status", *extra]
            return conn.execute(f"INSERT INTO messages ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                                (conversation_id, frame, role, content, "complete", *extra.values())).lastrowid

        for n in range(TURNS):
            question = row("user", f"question {n}" + (" with a needle in it" if n == 250 else ""))
            if n == 10:  # the earlier version of turn 10's answer
                marks["version"] = row("assistant", "the first answer 10", variant=1, branch_point=question)
                marks["point"] = question
            calling = row("assistant", "")
            conn.execute("INSERT INTO tool_calls (id, message_id, conversation_id, frame_id, seq, name, arguments, status, result)"
                         " VALUES (?, ?, ?, ?, 0, 'now', '{}', 'done', 'noon')", (f"call-{n}", calling, conversation_id, frame))
            answer = row("assistant", f"answer {n}")
            if n == 250:
                marks["needle"] = question
            if n == 10:
                marks["answer10"] = answer

    await db.transaction(write)
    return conversation_id, marks


async def read(client: Any, cid: str, **params: Any) -> dict:
    response = await client.get(f"/api/conversations/{cid}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def turns_whole(messages: list[dict]) -> None:
    shown = [m for m in messages if not m["variant"]]
    assert shown[0]["role"] == "user", shown[0]  # starts a turn
    for m in shown:
        if m["role"] == "assistant" and m["tool_calls"]:
            assert m["tool_calls"][0]["result"] == "noon"  # the call and its result together


async def test_a_long_conversation_is_read_a_part_at_a_time(chat):
    alice = await chat.host.member("alice")
    cid, marks = await seed(chat.host, alice.member["id"])
    whole = await read(alice, cid, all="1")
    assert len(whole["messages"]) == TURNS * 3 + 1 and whole["part"]["complete"] is True

    # Opened: the newest whole turns, about a screen's rows, not the 1,200.
    newest = await read(alice, cid)
    shown = [m for m in newest["messages"] if not m["variant"]]
    assert chat_routes.TRANSCRIPT_PAGE <= len(shown) < chat_routes.TRANSCRIPT_PAGE + 3
    assert shown[-1]["id"] == whole["messages"][-1]["id"]
    assert newest["part"]["later"] is None and newest["part"]["complete"] is False
    assert len(json.dumps(newest)) * 8 < len(json.dumps(whole))
    turns_whole(newest["messages"])

    # "Earlier": part after part back to the first, every row once, the version with its turn.
    parts, part = [newest], newest
    while part["part"]["earlier"] is not None:
        part = await read(alice, cid, before=str(part["part"]["earlier"]))
        turns_whole(part["messages"])
        parts.insert(0, part)
        assert len(parts) < 20
    assert parts[0]["part"]["base"] == 0
    rows = [m for p in parts for m in p["messages"]]
    assert sorted(m["id"] for m in rows) == [m["id"] for m in whole["messages"]]
    assert sorted(rows, key=lambda m: m["id"]) == whole["messages"]
    holding = [p for p in parts if any(m["id"] == marks["version"] for m in p["messages"])]
    assert len(holding) == 1 and any(m["id"] == marks["point"] for m in holding[0]["messages"])

    # "Later": from the first part on, to the newest.
    part, after = parts[0], []
    while part["part"]["later"] is not None:
        part = await read(alice, cid, after=str(part["part"]["later"]))
        turns_whole(part["messages"])
        after.extend(part["messages"])
        assert len(after) < len(whole["messages"])
    assert sorted([m["id"] for m in parts[0]["messages"]] + [m["id"] for m in after]) == [m["id"] for m in whole["messages"]]

    # After the last row, before the first, after one past the end: nothing, said so (once a 500).
    last = whole["messages"][-1]["id"]
    for params in ({"after": str(last)}, {"after": str(last + 1000)}, {"before": str(whole["messages"][0]["id"])}, {"before": "0"}):
        empty = await read(alice, cid, **params)
        assert empty["messages"] == [] and empty["part"]["later"] is None, params
    assert (await read(alice, cid, after=str(last)))["part"]["earlier"] == last + 1

    # Around a message, and around a search hit: a window holding it, not the whole.
    for window in (await read(alice, cid, around=str(marks["needle"])), await read(alice, cid, find="needle", snippet="a needle in")):
        ids = [m["id"] for m in window["messages"]]
        assert marks["needle"] in ids and len(ids) < chat_routes.TRANSCRIPT_PAGE + 6
        assert window["part"]["earlier"] is not None and window["part"]["later"] is not None
        turns_whole(window["messages"])
    assert (await read(alice, cid, find="needle"))["part"]["found"] == marks["needle"]
    assert (await read(alice, cid, find="haystack"))["part"]["found"] is None

    # A smaller part on request; the version switcher's rows come with the turn they branch in.
    small = await read(alice, cid, around=str(marks["answer10"]), limit="4")
    assert {marks["point"], marks["version"], marks["answer10"]} <= {m["id"] for m in small["messages"]}

    for params in ({"before": "x"}, {"after": "-1"}, {"around": "1.5"}, {"limit": "0"}, {"limit": "501"}, {"limit": "x"},
                   {"all": "yes"}, {"before": "1", "after": "2"}, {"find": "x" * 201}, {"before": "9" * 16}):
        response = await alice.get(f"/api/conversations/{cid}", params=params)
        assert response.status_code == 400, params

    # The API reference lists them and the answer's part.
    operation = (await alice.get("/api/openapi.json")).json()["paths"]["/api/conversations/{conversation_id}"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"all", "limit", "before", "after", "around", "find"}
    assert "earlier" in str(operation["responses"]["200"])
