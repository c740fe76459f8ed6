"""The transcript for a keyboard and a screen reader (WCAG 2.1 AA, found by an
accessibility probe): long tool arguments and results scroll in a box a keyboard
reaches, an answer drawn from history while it streams says it is busy, and a
conversation at 320 CSS px never scrolls sideways, in German either."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import DESKTOP, sign_in
from .test_accessibility import WCAG_21_AA, assert_no_violations, sign_in_german
from .test_chat import MODEL, configure_model, send

#: WCAG 2.1 A and AA alone: axe's best practices (heading-order in an open tool card)
#: are not what these tests are about.
WCAG_ONLY = {**WCAG_21_AA, "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}}

#: ~2 KB over 80 lines: taller than the 320 px a tool card's box shows.
LONG_FILE = "".join(f"line {n:02}: the quick brown fox jumps\n" for n in range(1, 81))

STREAMING = re.compile(r"\bstreaming\b")
SLOW_ANSWER = " ".join(f"word{n}" for n in range(1, 61))  # 60 tokens at 0.1 s: six seconds


async def scrolls_on_its_own(box: Any) -> bool:
    return await box.evaluate("(node) => node.scrollHeight > node.clientHeight")


async def test_long_tool_arguments_and_results_scroll_by_keyboard_and_pass_axe(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        admin_api = await host.admin()
        await configure_model(admin_api, server)
        rule = await admin_api.post("/api/admin/approval-rules", json={"tool_pattern": "write_file", "action": "require", "priority": 1})
        assert rule.status_code == 201, rule.text
        await host.create_member("wren")
        server.script(MODEL, [
            Reply(tool_calls=[ToolCall("write_file", {"path": "notes/long.txt", "content": LONG_FILE})]),
            Reply(tool_calls=[ToolCall("read_file", {"path": "notes/long.txt"})]),
            Reply(text="Written and read back."),
        ])
        page = await browser_pages.new(host.url)
        await sign_in(page, "wren", MEMBER_PASSWORD)
        await send(page, "Write a long file")

        approval = page.get_by_role("group", name="Approval for write_file")
        arguments = approval.locator(".tool-args")
        await expect(arguments).to_contain_text("line 80")
        assert await scrolls_on_its_own(arguments)
        await assert_no_violations(page, "an approval with long arguments", WCAG_ONLY)
        await expect(approval.get_by_role("region", name="Arguments of write_file")).to_have_count(1)
        # Tab from the card's summary lands on the arguments; the arrow keys scroll them.
        write_card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="write_file"))
        await write_card.locator("summary").focus()
        await page.keyboard.press("Tab")
        await expect(arguments).to_be_focused()
        await page.keyboard.press("PageDown")
        await page.wait_for_function("(node) => node.scrollTop > 0", arg=await arguments.element_handle())

        await approval.get_by_role("button", name="Approve").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Written and read back.")
        read_card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="read_file"))
        await expect(read_card.locator(".badge")).to_have_text("Done")
        await read_card.locator("summary").click()
        result = read_card.locator(".tool-result")
        await expect(result).to_contain_text("line 80")
        assert await scrolls_on_its_own(result)
        await write_card.locator("summary").click()  # its arguments, open, scroll too
        assert await scrolls_on_its_own(write_card.locator(".tool-args"))
        await assert_no_violations(page, "open tool cards with a long result and long arguments", WCAG_ONLY)
        await expect(read_card.get_by_role("region", name="Result of read_file")).to_have_count(1)
        await expect(write_card.get_by_role("region", name="Arguments of write_file")).to_have_count(1)
        await read_card.locator("summary").focus()
        await page.keyboard.press("Tab")  # from its summary: its arguments, then its result
        await expect(read_card.get_by_role("region", name="Arguments of read_file")).to_be_focused()
        await page.keyboard.press("Tab")
        await expect(result).to_be_focused()


async def test_a_streaming_answer_drawn_from_history_is_busy_until_it_ends(skald, browser_pages):
    """The first answer of a new conversation is drawn from the conversation's history
    as the page opens it, and so is an answer after a reload mid-stream: both said
    "streaming" by their class alone, not to a screen reader (aria-busy)."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("bea")
        server.script(MODEL, [Reply(text=SLOW_ANSWER, token_delay=0.1), Reply(text=SLOW_ANSWER, token_delay=0.1)])
        page = await browser_pages.new(host.url)
        await sign_in(page, "bea", MEMBER_PASSWORD)
        answers = page.locator(".msg.assistant")

        await send(page, "A new conversation, slowly")
        await page.wait_for_url("**/#chat/*")
        first = answers.first
        await expect(first.locator(".msg-body")).to_contain_text("word2")
        await expect(first).to_have_class(STREAMING)
        await expect(first).to_have_attribute("aria-busy", "true")
        await expect(first).to_have_attribute("data-status", "complete", timeout=15000)
        await expect(first.locator(".msg-body")).to_contain_text("word60")
        await expect(first).not_to_have_attribute("aria-busy", "true")

        await send(page, "Again, slowly")
        second = answers.nth(1)
        await expect(second.locator(".msg-body")).to_contain_text("word2")
        await page.reload()
        await expect(second).to_have_class(STREAMING)
        await expect(second).to_have_attribute("aria-busy", "true")
        await expect(second.locator(".msg-body")).to_contain_text("word60", timeout=15000)
        await expect(second).not_to_have_class(STREAMING)
        await expect(second).not_to_have_attribute("aria-busy", "true")


async def test_a_conversation_at_320_px_never_scrolls_sideways_in_german_or_english(skald, browser_pages):
    """WCAG 1.4.10: German's Umbenennen, Exportieren and Löschen were 22 px wider than
    the row under the title, and the whole page scrolled sideways."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        admin_api = await host.admin()
        await configure_model(admin_api, server)
        for username, locale in (("greta", "de"), ("ella", "en")):
            member = await host.create_member(username)
            response = await admin_api.patch(f"/api/admin/members/{member['id']}", json={"locale": locale})
            assert response.status_code == 200, response.text
        server.script(MODEL, [Reply(text="Hallo."), Reply(text="Hello.")])
        narrow = {"width": 320, "height": 640}

        german = await browser_pages.new(host.url, viewport=narrow, locale="de-DE")
        await sign_in_german(german, "greta")
        box = german.get_by_role("textbox", name="Nachricht")
        await box.fill("Hallo")
        await box.press("Enter")
        await expect(german.locator(".msg.assistant .msg-body")).to_have_text("Hallo.")
        # On a phone Rename, Export and Delete fold behind Aktionen, and unfold under the title.
        await german.get_by_role("button", name="Aktionen").click()
        await expect(german.get_by_role("button", name="Umbenennen")).to_be_visible()
        assert await german.evaluate("document.documentElement.scrollWidth") <= 320
        await german.get_by_role("button", name="Umbenennen").click()
        assert await german.evaluate("document.documentElement.scrollWidth") <= 320, "the rename form"
        await german.keyboard.press("Escape")
        # On a desktop the actions stay one row beside the title, as they were.
        await german.set_viewport_size(DESKTOP)
        tops = await german.locator(".conv-actions > *").evaluate_all("(nodes) => nodes.map((n) => n.getBoundingClientRect().top)")
        heading_top, actions_top = await german.evaluate(
            "[document.querySelector('.conv-heading'), document.querySelector('.conv-actions')].map((n) => n.getBoundingClientRect().top)")
        assert len(tops) == 3 and len(set(tops)) == 1, tops
        assert abs(heading_top - actions_top) < 12, (heading_top, actions_top)

        english = await browser_pages.new(host.url, viewport=narrow)
        await sign_in(english, "ella", MEMBER_PASSWORD)
        await send(english, "Hello")
        await expect(english.locator(".msg.assistant .msg-body")).to_have_text("Hello.")
        await english.get_by_role("button", name="Actions").click()
        await expect(english.get_by_role("button", name="Rename")).to_be_visible()
        assert await english.evaluate("document.documentElement.scrollWidth") <= 320
