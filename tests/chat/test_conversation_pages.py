"""A member with hundreds of conversations: the list comes a page at a time (a cursor,
and the answer says whether more exist), search finds every matching conversation
however many matches one large conversation holds, and an export is built off the
event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import skald_host.web.routes.chat as chat_routes
from skald_host.core.agent.store import ConversationStore

PAGE = chat_routes.CONVERSATION_PAGE


async def seed(host: Any, member_id: str, titles: list[str], messages: dict[int, list[str]] | None = None) -> list[str]:
    """Conversations with these titles, the first the oldest (pairs share an ``updated_at``:
    the id orders them), and the messages given by index; their ids, newest first."""
    db = host.core.users.owner_db(member_id)
    store = ConversationStore(db)
    ids = []
    for title in titles:
        conversation_id, _ = await store.create_conversation("assistant", title=title)
        ids.append(conversation_id)
    frames = {n: (await store.root_frame(ids[n])).id for n in (messages or {})}

    def write(conn: Any) -> None:
        for n, conversation_id in enumerate(ids):
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?",
                         (f"2026-01-01T00:{n // 2 // 60:02d}:{n // 2 % 60:02d}.000Z", conversation_id))
        for n, texts in (messages or {}).items():
            conn.executemany("INSERT INTO messages (conversation_id, frame_id, role, content, status) VALUES (?, ?, 'user', ?, 'complete')",
                             [(ids[n], frames[n], text) for text in texts])
            # The messages' writes left it the newest: back in its place.
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?",
                         (f"2026-01-01T00:{n // 2 // 60:02d}:{n // 2 % 60:02d}.000Z", ids[n]))

    await db.transaction(write)
    order = sorted(range(len(ids)), key=lambda n: (n // 2, ids[n]), reverse=True)
    return [ids[n] for n in order]


async def pages(client: Any, search: str | None = None) -> list[list[dict]]:
    found, before = [], None
    while True:
        params = {k: v for k, v in (("search", search), ("before", before)) if v is not None}
        response = await client.get("/api/conversations", params=params)
        assert response.status_code == 200, response.text
        found.append(response.json()["conversations"])
        before = response.json()["next_before"]
        if before is None:
            return found
        assert len(found) < 10


async def test_the_list_comes_a_page_at_a_time_and_says_whether_more_exist(chat):
    alice = await chat.host.member("alice")
    newest_first = await seed(chat.host, alice.member["id"], [f"Trip {n}" for n in range(PAGE + 31)])
    listed = await pages(alice)
    assert [len(page) for page in listed] == [PAGE, 31]
    assert [c["id"] for page in listed for c in page] == newest_first  # every one once, in order

    # A search that matches more than a page says so as well, titles first, then messages.
    more = await seed(chat.host, alice.member["id"], [f"Other {n}" for n in range(40)], {n: ["a trip to the sea"] for n in range(40)})
    found = await pages(alice, "trip")
    assert [len(page) for page in found] == [PAGE, 71]
    by_title = [c for page in found for c in page if "snippet" not in c]
    by_words = [c for page in found for c in page if "snippet" in c]
    assert [c["id"] for c in by_title] == newest_first and [c["id"] for c in by_words] == more
    assert all(c["snippet"] == "a trip to the sea" for c in by_words)

    # The API reference lists the cursor and the answer's next_before.
    operation = (await alice.get("/api/openapi.json")).json()["paths"]["/api/conversations"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"search", "before"}
    assert "next_before" in str(operation["responses"]["200"])

    for bad in ("", "x", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z~", "~abc", "2026-01-01T00:00:00.000Z~a~b", "x" * 5000):
        response = await alice.get("/api/conversations", params={"before": bad})
        assert response.status_code == 400, bad
        assert response.json()["code"] == "field_invalid" and response.json()["field"] == "before"


async def test_one_large_conversation_does_not_crowd_the_others_out_of_a_search(chat):
    alice = await chat.host.member("alice")
    long_message = "Go north for a while. " * 200 + "Then turn left at the mill. " + "Keep walking on. " * 200
    await seed(chat.host, alice.member["id"], ["Directions", "Dancing"], {0: [long_message], 1: ["turn, turn, turn and turn again"] * 1200})
    found = {c["title"]: c["snippet"] for page in await pages(alice, "turn") for c in page}
    assert found.keys() == {"Directions", "Dancing"}
    assert "turn left" in found["Directions"] and "turn" in found["Dancing"]


async def test_an_export_is_built_off_the_event_loop_as_before(chat, monkeypatch):
    alice = await chat.host.member("alice")
    [cid] = await seed(chat.host, alice.member["id"], ["Long"], {0: [f"Line {n}" for n in range(50)]})
    built_on_loop: list[bool] = []

    def on_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    for name in ("_markdown_export", "_json_export"):
        original = getattr(chat_routes, name)

        def recorded(*args: Any, _original: Any = original, **kwargs: Any) -> str:
            built_on_loop.append(on_loop())
            return _original(*args, **kwargs)

        monkeypatch.setattr(chat_routes, name, recorded)
    markdown = await alice.get(f"/api/conversations/{cid}/export", params={"format": "md"})
    exported = await alice.get(f"/api/conversations/{cid}/export", params={"format": "json"})
    assert markdown.status_code == 200 and "Line 49" in markdown.text
    assert [m["content"] for m in exported.json()["messages"]][:50] == [f"Line {n}" for n in range(50)]
    assert built_on_loop == [False, False]
