"""A conversation of thousands of rows stays light in the page: it opens with the newest
part, "Earlier messages" reads the part before from the host, a search result opens at the
part around the message found, and a reload (here: a version flipped from another client)
draws again a bounded part, never every row the reader had drawn (scale probe: a search
hit drew 5,000 rows at once, a reload after it all of them again). Counts, not times."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in, stored_conversation

TURNS = 1200  # 2,400 rows on screen, 1 version


async def seed(host: Any, member_id: str) -> str:
    rows: list[tuple[Any, ...]] = []
    for n in range(TURNS):
        question = "Wie schlafen Pinguine im Winter?" if n == 40 else f"Frage {n}"
        rows.append(("user", question))
        if n == TURNS - 1:
            rows.append(("assistant", "Die erste Antwort.", "complete", {"variant": 1, "branch_point": question}))
        rows.append(("assistant", f"Antwort **{n}**."))
    return await stored_conversation(host, member_id, "Sehr lang", rows)


async def rows(page: Any) -> int:
    return await page.locator(".transcript .msg").count()


async def rows_become(page: Any, test: str, n: int) -> None:
    """Wait until the rows drawn compare so with ``n`` (``test``: ">" or "<")."""
    await page.wait_for_function(f"(n) => document.querySelectorAll('.transcript .msg').length {test} n", arg=n)


async def test_a_long_conversation_draws_a_bounded_part_opened_searched_and_reloaded(skald, browser_pages):
    host = await skald.start()
    member = await host.member("dora", locale="de")
    conversation_id = await seed(host, member.member["id"])
    page = await browser_pages.new(host.url)
    await sign_in(page, "dora", MEMBER_PASSWORD)

    # A search result far back: the part around it, the message focused and marked.
    search = page.get_by_role("searchbox", name="Gespräche durchsuchen")
    await search.fill("pinguine")
    await page.locator(".conv-list .conv-snippet").first.wait_for()
    await page.locator(".conv-list a").first.click()
    hit = page.locator(".msg.user", has_text="Wie schlafen Pinguine im Winter?")
    await expect(hit).to_be_focused()
    await expect(hit).to_be_in_viewport()
    assert await rows(page) < 300  # not the 2,400
    # The newer rows are a button away, and reading them goes on from the part.
    later = page.locator(".later-messages button")
    await expect(later).to_be_visible()
    drawn = await rows(page)
    await later.click()
    await rows_become(page, ">", drawn)
    assert await rows(page) < 500

    # Opened as usual: the newest part; "Earlier messages" reads the parts before it.
    await page.goto(f"{host.url}/#chat/{conversation_id}")
    await expect(page.locator(".msg.assistant", has_text=f"Antwort {TURNS - 1}.")).to_be_visible()
    first = await rows(page)
    assert first < 300
    earlier = page.locator(".earlier-messages button")
    for _ in range(4):
        before = await rows(page)
        await earlier.click()
        await rows_become(page, ">", before)
    assert await rows(page) > first + 300  # the reader drew them: they are there
    # A version flipped elsewhere: the page reads the conversation again and draws the
    # part the reader is in (the view kept), not every row drawn before.
    await page.locator(".transcript").evaluate("(node) => { node.scrollTop = 0; }")
    flip = await member.put(f"/api/conversations/{conversation_id}/version", json={"variant": 1})
    assert flip.status_code == 200, flip.text
    await rows_become(page, "<", 400)
    await expect(page.locator(".transcript .msg").first).to_be_attached()
