"""A facts list (``dl.facts``: label, value) in a narrow card breaks no word in two: on
the German Helpers page at 1280x800 the label "Darf Arbeit abgeben an" took the card's
width at max-content and the values broke mid-word ("niema|nden", "Allzwe|ck-Helfer",
the version hash). A line may still end after a hyphen or between words."""

from __future__ import annotations

from typing import Any

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import PHONE, screenshot
from .test_accessibility import sign_in_german

#: The words of every label and value that the browser laid out on more than one line:
#: a word is what lies between spaces, a hyphen ending the part before it.
BROKEN_WORDS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll("dl.facts > dt, dl.facts > dd")) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      for (const word of text.data.matchAll(/[^\\s-]+-?/g)) {
        const range = document.createRange();
        range.setStart(text, word.index);
        range.setEnd(text, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
        if (lines.size > 1) broken.push(word[0]);
      }
    }
  }
  return broken;
}"""

#: Per facts list of a Helpers card: the widest label against the list's width.
LABEL_SHARE = """() => [...document.querySelectorAll(".agent-definition dl.facts")].map((list) =>
  Math.max(...[...list.querySelectorAll(":scope > dt")].map((label) => label.getBoundingClientRect().width)) / list.clientWidth)"""


async def open_helpers(page: Any) -> None:
    await page.goto("/#agents")
    await page.locator(".agent-definition dl.facts").first.wait_for()


async def test_the_german_helpers_cards_break_no_word_and_keep_labels_to_half_the_card(skald, browser_pages):
    host = await skald.start()
    await host.setup_admin()
    await host.create_member("greta", locale="de")
    page = await browser_pages.new(host.url, locale="de-DE", viewport={"width": 1280, "height": 800})
    await sign_in_german(page, "greta", MEMBER_PASSWORD)
    await open_helpers(page)
    assert "Darf Arbeit abgeben an" in await page.locator(".agent-definition dl.facts").first.inner_text()
    shares = await page.evaluate(LABEL_SHARE)
    assert shares and max(shares) <= 0.5, shares
    assert await page.evaluate(BROKEN_WORDS) == []
    await screenshot(page, "helpers-facts-de-desktop")

    await page.set_viewport_size(PHONE)  # labels above values
    await open_helpers(page)
    assert await page.evaluate(BROKEN_WORDS) == []
    await page.goto("/#account")
    await page.locator("dl.facts").first.wait_for()
    assert await page.evaluate(BROKEN_WORDS) == []
