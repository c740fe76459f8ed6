"""A long conversation opens at its newest rows, not drawn whole (thousands of answers
held the page for seconds on every open, Regenerate and reconnect): "Earlier messages"
draws the ones before, above, in order, where the reader is, and the live log does not
read them out as news."""

from __future__ import annotations


from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in, stored_conversation

TURNS = 300  # 600 messages

ROWS = """() => [...document.querySelectorAll(".transcript-inner > .msg[data-message-id]")].map((n) => Number(n.dataset.messageId))"""
FIRST_ROW_TOP = """() => document.querySelector(".transcript-inner > .msg[data-message-id]").getBoundingClientRect().top"""
# What aria-live said on the log when rows came into it: "off" is drawn, not news.
WATCH_LIVE = """() => {
  window.__liveAtAdd = [];
  const log = document.querySelector(".transcript");
  new MutationObserver((records) => {
    if (records.some((r) => r.addedNodes.length)) window.__liveAtAdd.push(log.getAttribute("aria-live"));
  }).observe(log.querySelector(".transcript-inner"), { childList: true });
}"""


async def test_a_long_conversation_opens_at_its_newest_rows_and_draws_earlier_ones_on_request(skald, browser_pages):
    host = await skald.start()
    client = await host.member("lena")
    rows = [row for n in range(TURNS) for row in (("user", f"Question {n}"), ("assistant", f"Answer {n}, with `code` and **words**."))]
    conversation_id = await stored_conversation(host, client.member["id"], "A long one", rows)
    page = await browser_pages.new(host.url)
    await sign_in(page, "lena", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#chat/{conversation_id}")
    newest = page.locator(".msg.assistant").last
    await expect(newest).to_contain_text(f"Answer {TURNS - 1},")
    await expect(newest).to_be_in_viewport()
    regenerate = newest.get_by_role("button", name="Regenerate")
    await regenerate.focus()
    await expect(regenerate).to_be_focused()

    # Bounded: not all 600 rows, the newest ones, in order.
    drawn = await page.evaluate(ROWS)
    assert 0 < len(drawn) <= 150, len(drawn)
    assert drawn == sorted(drawn)
    await expect(page.locator(".transcript-inner > .msg").first).not_to_contain_text("Question 0")

    await page.evaluate(WATCH_LIVE)
    earlier = page.get_by_role("button", name="Earlier messages")
    await page.locator(".transcript").evaluate("(t) => { t.scrollTop = 0; }")  # where the button is
    await earlier.focus()
    while await earlier.is_visible():
        before_ids = await page.evaluate(ROWS)
        top = await page.evaluate(FIRST_ROW_TOP)
        first_before = page.locator(f'.msg[data-message-id="{before_ids[0]}"]')
        await page.keyboard.press("Enter")
        await page.wait_for_function("(n) => document.querySelectorAll('.transcript-inner > .msg[data-message-id]').length > n", arg=len(before_ids))
        after_ids = await page.evaluate(ROWS)
        # Above what was drawn, in order, the rows already drawn kept as they were.
        assert after_ids == sorted(after_ids) and after_ids[-len(before_ids):] == before_ids
        # The reader's view did not move: the row that was first is where it was.
        moved = await first_before.evaluate("(n) => n.getBoundingClientRect().top")
        assert abs(moved - top) <= 1, (top, moved)
    # All of them now, from the first; the focus stayed in the transcript (not on <body>).
    assert len(await page.evaluate(ROWS)) == 2 * TURNS
    await expect(page.locator(".transcript-inner > .msg").first).to_contain_text("Question 0")
    assert await page.evaluate("() => document.querySelector('.transcript').contains(document.activeElement)")
    # Drawn while the log was not live: older rows are not read out as new.
    live_at_add = await page.evaluate("() => window.__liveAtAdd")
    assert live_at_add and set(live_at_add) == {"off"}, live_at_add
    await expect(page.locator(".transcript")).to_have_attribute("aria-live", "polite")
