"""On a 390x844 phone the conversation's header took 190 px (the back link, the title,
Rename/Export/Delete and the model picker each on a row of its own) from the transcript
(a newcomer's report). It is one row now (←, the title, Actions) and the picker: at most
100 px, every control still reachable by keyboard and named for a screen reader."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import PHONE, sign_in
from .test_accessibility import assert_no_violations
from .test_chat import MODEL, add_model, configure_model

HEADER_HEIGHT = """() => document.querySelector(".conv-header").getBoundingClientRect().height"""


async def test_the_phone_header_is_one_short_row_and_its_folded_actions_work_by_keyboard(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL, "second-model"), api_key="sk-test") as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_model(admin, server)
        await add_model(admin, "second-model", "Second")
        member = await host.member("erin")
        server.script(MODEL, [Reply(text="Hello.")])
        await member.chat("A conversation with a title long enough to be cut short on a phone screen")
        cid = (await member.get("/api/conversations")).json()["conversations"][0]["id"]
        page = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(page, "erin", MEMBER_PASSWORD)
        await page.goto(f"/#chat/{cid}")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Hello.")
        await expect(page.locator("select.model-select")).to_be_visible()
        height = await page.evaluate(HEADER_HEIGHT)
        assert height <= 100, f"the header takes {height}px of an 844 px phone"
        back, more = page.get_by_role("link", name="All conversations"), page.get_by_role("button", name="Actions")
        tops = [await node.evaluate("(n) => Math.round(n.getBoundingClientRect().top)") for node in (back, more, page.locator(".conv-heading"))]
        assert max(tops) - min(tops) <= 12, tops  # one row
        assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        await assert_no_violations(page, "the phone's compact conversation header")

        # The folded actions, by keyboard: Actions unfolds them; Escape folds them back.
        rename = page.get_by_role("button", name="Rename")
        await expect(rename).to_be_hidden()
        await expect(more).to_have_attribute("aria-expanded", "false")
        await more.focus()
        await page.keyboard.press("Enter")
        await expect(more).to_have_attribute("aria-expanded", "true")
        await page.keyboard.press("Tab")
        await expect(rename).to_be_focused()
        for name in ("Export", "Delete"):
            await expect(page.locator(".conv-actions").get_by_text(name, exact=True)).to_be_visible()
        await assert_no_violations(page, "the phone's unfolded conversation actions")
        await page.keyboard.press("Escape")
        await expect(more).to_be_focused()
        await expect(rename).to_be_hidden()

        # Rename works from the fold.
        await page.keyboard.press("Enter")
        await rename.click()
        title = page.get_by_role("textbox", name="Title")
        await title.fill("Renamed on the phone")
        await page.keyboard.press("Enter")
        await expect(page.get_by_role("heading", name="Renamed on the phone")).to_be_visible()
        await expect(rename).to_be_focused()
        assert (await member.get(f"/api/conversations/{cid}")).json()["conversation"]["title"] == "Renamed on the phone"

        # The picker is in reach on the phone too.
        await page.get_by_label("Model", exact=True).select_option(label="Second")
        await expect(page.get_by_label("Model", exact=True)).not_to_have_value("")

        # On a desktop the actions stay beside the title, and Actions is not there.
        await page.set_viewport_size({"width": 1280, "height": 900})
        await expect(more).to_be_hidden()
        await expect(rename).to_be_visible()
