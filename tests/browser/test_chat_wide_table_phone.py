"""A wide table in an answer on a phone (newcomer report 7, point 2): it scrolls sideways
as a code block does, and its words stay whole; a long URL in prose still wraps."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import PHONE, screenshot, sign_in
from .test_chat import MODEL, configure_model

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
TABLE = "\n".join(
    [
        "| " + " | ".join(DAYS) + " |",
        "|" + "---|" * len(DAYS),
        "| " + " | ".join(["Porridge with apples"] * len(DAYS)) + " |",
    ]
)
URL = "https://example.com/" + "a-very-long-path-segment-" * 8


async def test_a_wide_table_scrolls_sideways_on_a_phone_and_keeps_its_words_whole(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("erin")
        server.script(MODEL, [Reply(text=f"The week:\n\n{TABLE}\n\nMore at {URL}\n")])
        page = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(page, "erin", MEMBER_PASSWORD)
        box = page.get_by_role("textbox", name="Message")
        await box.fill("Plan the meals")
        await box.press("Enter")
        table = page.locator(".msg.assistant .md table")
        await expect(table).to_be_visible()
        await expect(page.locator(".msg.assistant")).to_contain_text("a-very-long-path-segment")
        # It scrolls in its own box, a focusable region a keyboard scrolls too.
        scroller = page.locator(".msg.assistant .md .md-table")
        assert await scroller.evaluate("(b) => b.scrollWidth > b.clientWidth"), await scroller.evaluate("(b) => [b.scrollWidth, b.clientWidth]")
        await expect(scroller).to_have_attribute("tabindex", "0")
        # One line box per word: a word broken at any letter ("Mon/da/y") has two or more.
        for cell in (table.locator("th").first, table.locator("td").first):
            broken = await cell.evaluate(
                """(cell) => {
                  const text = cell.firstChild, words = [];
                  for (const match of text.data.matchAll(/\\S+/g)) {
                    const range = document.createRange();
                    range.setStart(text, match.index);
                    range.setEnd(text, match.index + match[0].length);
                    const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
                    if (lines.size > 1) words.push(match[0]);
                  }
                  return words;
                }"""
            )
            assert broken == [], broken
        # The page itself does not scroll sideways: the long URL in prose still wraps.
        assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        await screenshot(page, "chat-wide-table-phone", full_page=False)
