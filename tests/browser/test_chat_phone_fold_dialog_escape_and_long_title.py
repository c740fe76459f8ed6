"""A keyboard and screen-reader probe on a 390x844 phone (WCAG 2.1 AA): cancelling
Delete's confirmation from the folded Actions lost the focus to <body> (the tap on the
dialog's Cancel counted as a tap outside the fold, which folded Delete away); Escape on
Actions itself did not fold the actions; and a long conversation title was cut to one
line with an ellipsis, with nothing to read the rest by."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import PHONE, sign_in
from .test_chat import MODEL, configure_model

ACTIVE = "() => { const a = document.activeElement; return a ? `${a.tagName}.${a.className}` : null; }"
LONG_TITLE = "A conversation with a title long enough to be cut short on a phone screen, and then some"


async def _phone_conversation(skald, browser_pages, title):
    server = ScriptedModelServer(models=(MODEL,), api_key="sk-test")
    await server.__aenter__()
    host = await skald.start()
    await configure_model(await host.admin(), server)
    member = await host.member("erin")
    server.script(MODEL, [Reply(text="Hello.")])
    await member.chat("Hi")
    cid = (await member.get("/api/conversations")).json()["conversations"][0]["id"]
    assert (await member.patch(f"/api/conversations/{cid}", json={"title": title})).status_code == 200
    page = await browser_pages.new(host.url, viewport=PHONE)
    await sign_in(page, "erin", MEMBER_PASSWORD)
    await page.goto(f"/#chat/{cid}")
    await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Hello.")
    return server, member, cid, page


async def test_cancelling_delete_from_the_fold_keeps_the_focus_and_escape_on_actions_folds(skald, browser_pages):
    server, member, cid, page = await _phone_conversation(skald, browser_pages, "A conversation")
    try:
        more = page.get_by_role("button", name="Actions")
        delete = page.locator(".conv-actions").get_by_role("button", name="Delete")
        for way in ("Enter", "Space", "click"):
            await more.click()
            await delete.click()
            dialog = page.get_by_role("dialog")
            cancel = dialog.get_by_role("button", name="Cancel")
            await expect(cancel).to_be_focused()
            if way == "click":
                await cancel.click()
            else:
                await page.keyboard.press(way)
            await expect(dialog).to_have_count(0)
            # Delete is still shown and has the focus back, not <body>.
            await expect(delete).to_be_visible()
            await expect(delete).to_be_focused()
            assert await page.evaluate(ACTIVE) != "BODY.", way
            await page.keyboard.press("Escape")
            await expect(more).to_have_attribute("aria-expanded", "false")
            await expect(more).to_be_focused()
        assert (await member.get(f"/api/conversations/{cid}")).status_code == 200

        # Escape with the focus on Actions itself folds them too, the focus staying there.
        await more.focus()
        await page.keyboard.press("Enter")
        await expect(more).to_have_attribute("aria-expanded", "true")
        await page.keyboard.press("Escape")
        await expect(more).to_have_attribute("aria-expanded", "false")
        await expect(delete).to_be_hidden()
        await expect(more).to_be_focused()
    finally:
        await server.__aexit__(None, None, None)


async def test_a_long_title_shows_on_two_lines_and_whole_in_its_title(skald, browser_pages):
    server, member, cid, page = await _phone_conversation(skald, browser_pages, LONG_TITLE)
    try:
        heading = page.get_by_role("heading", level=1)
        await expect(heading).to_have_text(LONG_TITLE)
        await expect(heading).to_have_attribute("title", LONG_TITLE)
        for width in (390, 320):
            await page.set_viewport_size({"width": width, "height": 844})
            lines = await heading.evaluate(
                "(h) => Math.round(h.getBoundingClientRect().height / parseFloat(getComputedStyle(h).lineHeight))")
            assert lines == 2, (width, lines)  # wrapped, and cut after two lines, not one
            assert await page.evaluate("document.documentElement.scrollWidth") <= width

        # A rename's new title is its title attribute too.
        await page.set_viewport_size(PHONE)
        await page.get_by_role("button", name="Actions").click()
        await page.get_by_role("button", name="Rename").click()
        await page.get_by_role("textbox", name="Title").fill("Short")
        await page.keyboard.press("Enter")
        await expect(heading).to_have_text("Short")
        await expect(heading).to_have_attribute("title", "Short")
    finally:
        await server.__aexit__(None, None, None)
