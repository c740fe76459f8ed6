"""The settings' "Read answers aloud" checkbox sits beside its words: it was drawn as a
44 px box centred above them (the app's ``label`` is a column and its inputs are full
width, and ``.row`` undid neither)."""

from __future__ import annotations

import pytest

from mobile_support import BASE, pairing_code
from test_mobile_app_browser import PHONE


@pytest.fixture
def browser(plugin_browser):
    return plugin_browser.browser


async def test_the_voice_checkbox_is_beside_its_label(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    context = await browser.new_context(base_url=setup.host.url, viewport=PHONE, is_mobile=True, has_touch=True, locale="de-DE")
    page = await context.new_page()
    page.set_default_timeout(10_000)
    try:
        await page.goto(f"{BASE}/app/")
        await page.fill("input[name=code]", await pairing_code(alice))
        await page.tap("button[type=submit]")
        await page.wait_for_selector("text=Neuer Chat")
        await page.goto(f"{BASE}/app/#settings")
        await page.wait_for_selector("input[name=voice]")
        box, words, label = await page.evaluate(
            """() => {
                const input = document.querySelector("input[name=voice]");
                const label = input.closest("label");
                const range = document.createRange();
                range.selectNodeContents([...label.childNodes].find((n) => n.nodeType === Node.TEXT_NODE));
                const rect = (r) => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height});
                return [rect(input.getBoundingClientRect()), rect(range.getBoundingClientRect()), rect(label.getBoundingClientRect())];
            }"""
        )
        assert box["width"] <= 30 and box["height"] <= 30, box  # a checkbox, not a field's width
        assert box["right"] <= words["left"], (box, words)  # before its words, on their line
        assert box["top"] < words["bottom"] and words["top"] < box["bottom"], (box, words)
        assert label["height"] >= 44, label  # the label is still a thumb-sized target
    finally:
        await context.close()
