"""A member with more conversations than a page of the list: "More conversations" at
the end of the sidebar list adds the next page (by keyboard too), and a re-read of the
list (here: a rename heard live) keeps the pages added."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in

COUNT = 230


async def test_more_conversations_adds_the_next_page_and_a_refresh_keeps_it(skald, browser_pages):
    from skald_host.core.agent.store import ConversationStore

    host = await skald.start()
    client = await host.member("lena")
    db = host.core.users.owner_db(client.member["id"])
    store = ConversationStore(db)
    ids = [(await store.create_conversation("assistant", title=f"Trip {n}"))[0] for n in range(COUNT)]

    def write(conn: Any) -> None:  # Trip 0 the oldest
        for n, conversation_id in enumerate(ids):
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (f"2026-01-01T{n // 60:02d}:{n % 60:02d}:00.000Z", conversation_id))

    await db.transaction(write)
    page = await browser_pages.new(host.url)
    await sign_in(page, "lena", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#chat")
    entries = page.locator(".conv-list > li")
    await expect(entries).to_have_count(200)
    await expect(entries.first).to_contain_text("Trip 229")
    more = page.get_by_role("button", name="More conversations")
    # Enter on the button as the locator finds it at that moment: a focus set first and a
    # key pressed after lost the key on a loaded machine (a clean-clone run), when the list
    # was drawn again in between and the focused button was no longer the one shown.
    await expect(more).to_be_visible()
    await more.press("Enter")
    await expect(entries).to_have_count(COUNT)
    await expect(entries.last).to_contain_text("Trip 0")
    await expect(more).to_be_hidden()
    # The button gone, the focus went on to the first conversation it added.
    await expect(page.locator(".conv-list > li").nth(200).locator("a")).to_be_focused()
    titles = await entries.locator(".conv-title").all_inner_texts()
    assert titles == [f"Trip {n}" for n in reversed(range(COUNT))]

    # A rename (heard live) re-reads the list: the renamed one moves up, none is lost.
    assert (await client.patch(f"/api/conversations/{ids[5]}", json={"title": "Trip five, renamed"})).status_code == 200
    await expect(entries.first).to_contain_text("Trip five, renamed")
    await expect(entries).to_have_count(COUNT)
    titles = await entries.locator(".conv-title").all_inner_texts()
    assert titles == ["Trip five, renamed"] + [f"Trip {n}" for n in reversed(range(COUNT)) if n != 5]
