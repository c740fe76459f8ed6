"""On a 390x844 phone (newcomer probe): the first message sent from the chat's start page
took the focus out of the message box, to the whole <main>, framed by a focus ring, and
the words typed next were lost (the route to the new conversation focused <main>, and a
phone's conversation page leaves the message box alone). A route's focus on <main> after
a key (Back) drew that ring too. And the folded Actions stayed open after a tap outside."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import PHONE, sign_in
from .test_chat import MODEL, configure_model

ACTIVE = "() => { const a = document.activeElement; return a ? `${a.tagName}.${a.className}` : null; }"
MAIN_RING = "() => { const m = document.querySelector('main#content'); return [m.matches(':focus'), getComputedStyle(m).outlineStyle]; }"


async def test_a_phone_keeps_writing_after_the_first_message_and_main_shows_no_ring(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("erin")
        server.script(MODEL, [Reply(text="Hello there.")])
        page = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(page, "erin", MEMBER_PASSWORD)
        box = page.get_by_role("textbox", name="Message")
        await box.click()
        await page.keyboard.type("Hi")
        await page.keyboard.press("Enter")
        await page.wait_for_url("**/#chat/*")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Hello there.")
        await expect(box).to_be_focused()
        assert await page.evaluate(ACTIVE) == "TEXTAREA.composer-input", await page.evaluate(ACTIVE)
        await page.keyboard.type("and more")
        await expect(box).to_have_value("and more")

        # Back to the start page by the address: the focus is on <main>, with no ring round it.
        await page.go_back()
        await expect(page.get_by_role("heading", name="Hello, erin")).to_be_visible()
        assert await page.evaluate(MAIN_RING) == [True, "none"]

        # The skip link's jump to <main>, which the member made, keeps its ring.
        await page.get_by_role("link", name="Skip to content").focus()
        await page.keyboard.press("Enter")
        await expect(page.locator("main#content")).to_be_focused()
        assert await page.evaluate(MAIN_RING) == [True, "solid"]


async def test_the_phone_actions_fold_closes_on_a_tap_outside_it(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        member = await host.member("erin")
        server.script(MODEL, [Reply(text="Hello.")])
        await member.chat("A conversation")
        cid = (await member.get("/api/conversations")).json()["conversations"][0]["id"]
        page = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(page, "erin", MEMBER_PASSWORD)
        await page.goto(f"/#chat/{cid}")
        answer = page.locator(".msg.assistant .msg-body").last
        await expect(answer).to_have_text("Hello.")
        more, rename = page.get_by_role("button", name="Actions"), page.get_by_role("button", name="Rename")

        await more.click()
        await expect(more).to_have_attribute("aria-expanded", "true")
        await expect(rename).to_be_visible()
        await answer.click()  # outside the fold
        await expect(more).to_have_attribute("aria-expanded", "false")
        await expect(rename).to_be_hidden()

        # Actions itself still folds and unfolds them; a tap inside the fold keeps it open.
        await more.click()
        await expect(more).to_have_attribute("aria-expanded", "true")
        await page.locator(".conv-actions").get_by_text("Export", exact=True).click()
        await expect(more).to_have_attribute("aria-expanded", "true")
        await more.click()
        await expect(more).to_have_attribute("aria-expanded", "false")

        # Escape still folds them, the focus back on Actions.
        await more.click()
        await rename.focus()
        await page.keyboard.press("Escape")
        await expect(more).to_have_attribute("aria-expanded", "false")
        await expect(more).to_be_focused()
