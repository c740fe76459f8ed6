"""Two messages the chat used to handle without a word: a pasted text over the message
limit was cut to the composer's maxlength and the rest sent as if whole; an edit down to
white space did nothing on Enter, the edit box left open with no reason given."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model, send

LIMIT = 100_000


async def test_a_text_over_the_limit_is_kept_whole_said_too_long_and_not_sent(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("lena", display_name="Lena")
        server.script(MODEL, [Reply(text="Got it.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "lena", MEMBER_PASSWORD)
        box = page.get_by_role("textbox", name="Message")
        await box.fill("x" * 120_000)
        # Kept whole: nothing of it quietly dropped.
        assert await box.evaluate("(node) => node.value.length") == 120_000
        status = page.locator(".composer [role=status]")
        await expect(status).to_have_text(
            f"The message has 120000 characters; at most {LIMIT} can be sent. Shorten it or send it in parts."
        )
        await expect(status).to_have_attribute("aria-live", "polite")
        await expect(box).to_have_attribute("aria-invalid", "true")
        await expect(page.locator(".composer button.send")).to_be_disabled()
        await box.press("Enter")
        await expect(page.locator(".msg.user")).to_have_count(0)
        assert server.requests_for(MODEL) == []
        # Shortened to the limit: the words go, and it is sent whole.
        await box.evaluate(f"(node) => {{ node.value = node.value.slice(0, {LIMIT}); node.dispatchEvent(new Event('input')); }}")
        await expect(status).to_have_text("")
        await expect(box).not_to_have_attribute("aria-invalid", "true")
        await box.press("Enter")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Got it.")
        assert len(server.requests_for(MODEL)[-1].last_user_text) == LIMIT


async def test_an_edit_down_to_white_space_says_why_it_is_not_sent(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("jo", display_name="Jo")
        server.script(MODEL, [Reply(text="First take.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "jo", MEMBER_PASSWORD)
        await send(page, "A haiku, please")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("First take.")
        await page.locator(".msg.user").get_by_role("button", name="Edit").click()
        box = page.get_by_role("textbox", name="Edit your message")
        await box.fill("   \n  ")
        await box.press("Enter")
        form = page.locator(".edit-form")
        await expect(form.get_by_role("status")).to_have_text(
            "The message is empty: write something, or press Cancel to keep it as it was."
        )
        await expect(box).to_be_focused()
        assert len(server.requests_for(MODEL)) == 1
