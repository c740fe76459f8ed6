"""What a power user with a screen reader and a keyboard met on the chat screen: the
focus kept in an answer as its stream ends, a search result opened at its match when
the words matched only folded ("Strassenbahn" for "Straßenbahn"), search results said
in a live region, messages named by who wrote them, and "All conversations" on a phone
returning to the entry the member came from."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import PHONE, sign_in
from .test_accessibility import assert_no_violations
from .test_chat import MODEL, configure_model, send

WORDS = " ".join(f"word{n}" for n in range(1, 61))
CODE_THEN_WORDS = f"Here is the code:\n\n```python\ndef double(x):\n    return x * 2\n```\n\nAnd then {WORDS} done."


async def test_focus_on_a_code_blocks_copy_button_stays_when_the_streamed_answer_ends(skald, browser_pages):
    """The finished code block stays the node it was (its Copy code keeps the focus), and
    the answer reads as a fresh render of its text does: a reload shows the same."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("ivo")
        server.script(MODEL, [Reply(text=CODE_THEN_WORDS, token_delay=0.05)])
        page = await browser_pages.new(host.url)
        await sign_in(page, "ivo", MEMBER_PASSWORD)
        await send(page, "Show me some code.")
        streaming = page.locator(".msg.assistant.streaming")
        await expect(streaming.locator(".msg-body")).to_contain_text("And then")  # the code block is finished
        copy = streaming.get_by_role("button", name="Copy code")
        await copy.evaluate("(button) => { window.probeCopy = button; button.focus(); }")
        answer = page.locator(".msg.assistant").last
        await expect(answer).to_have_attribute("data-status", "complete")
        assert await page.evaluate("() => document.activeElement === window.probeCopy && window.probeCopy.isConnected")
        await expect(answer.get_by_role("button", name="Copy code")).to_be_focused()
        settled = await answer.locator(".msg-body").inner_html()
        await page.reload()
        await expect(page.locator(".msg.assistant").last.locator(".msg-body")).to_contain_text("word60 done.")
        assert await page.locator(".msg.assistant").last.locator(".msg-body").inner_html() == settled


SETTLE_A_TAIL_CODE_BLOCK = """async () => {
  const { Transcript } = await import("/ui/pages/chat-transcript.js");
  const { renderMarkdown } = await import("/ui/lib/markdown.js");
  const transcript = new Transcript({});
  document.querySelector("#content").append(transcript.node);
  const text = "Intro.\\n\\n```python\\nprint(len('abc'))\\n```";
  transcript.running = true;
  transcript.token({ message_id: 990001, delta: text });
  transcript.flush();
  const answer = transcript.node.querySelector("[data-message-id='990001']");
  answer.querySelector(".copy-code").focus();
  const intro = answer.querySelector(".msg-body > p");
  transcript.finished({ message_id: 990001, content: text, model: "m" });
  // Read at once: an await here let the page's own start (it focuses its composer) take
  // the focus first on a loaded machine, which was no fault of finished().
  const focused = document.activeElement.matches(".copy-code") && answer.contains(document.activeElement);
  const fresh = document.createElement("div");
  fresh.replaceChildren(...renderMarkdown(text));
  const result = {
    focused,
    introKept: intro.isConnected,
    highlighted: answer.querySelector("code.language-python span") !== null,
    asFresh: answer.querySelector(".msg-body").innerHTML === fresh.innerHTML,
  };
  transcript.node.remove();
  return result;
}"""


async def test_a_code_block_still_streaming_when_the_answer_ends_keeps_the_focus_on_its_counterpart(skald, browser_pages):
    """The last block is rendered anew as the answer ends (highlighted now, its caret
    gone): the focus moves to its Copy code, not to <body>; the paragraph before stays."""
    host = await skald.start()
    await host.create_member("ivo")
    page = await browser_pages.new(host.url)
    await sign_in(page, "ivo", MEMBER_PASSWORD)
    assert await page.evaluate(SETTLE_A_TAIL_CODE_BLOCK) == {"focused": True, "introKept": True, "highlighted": True, "asFresh": True}


async def test_a_search_result_found_only_folded_opens_at_the_message_that_matched(skald, browser_pages):
    """The server folds accents, case and "ß" (search_form); the page finds the message
    the same way: "Strassenbahn", "creme" and "apfel" each open at their message."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        filler = " ".join(["Lorem ipsum dolor sit amet."] * 25)
        server.responder = lambda request: Reply(text=f"Gut. {filler}")
        member = await host.member("jana", locale="de")
        first = await member.chat("Eine Frage zum Ausflug")
        asked = {
            "Strassenbahn": "Wir treffen uns an der Straßenbahnhaltestelle.",
            "creme": "Danach gibt es Café crème am See.",
            "apfel": "Ich bringe Äpfel mit.",
        }
        for text in asked.values():
            await member.chat(text, conversation=first.conversation_id)
            for n in range(3):
                await member.chat(f"Noch etwas {n}", conversation=first.conversation_id)
        page = await browser_pages.new(host.url)
        await sign_in(page, "jana", MEMBER_PASSWORD)
        for query, text in asked.items():
            await page.get_by_role("searchbox", name="Gespräche durchsuchen").fill(query)
            await page.locator(".conv-list a", has=page.locator(".conv-snippet", has_text=text)).click()
            hit = page.locator(".msg.user", has_text=text)
            await expect(hit).to_be_focused()
            await expect(hit).to_have_class(re.compile(r"\bsearch-hit\b"))
            await expect(hit).to_be_in_viewport()


async def test_search_results_are_said_in_a_status_region_in_english_and_german(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        server.responder = lambda request: Reply(text="Noted.")
        for username, locale in (("kim", "en"), ("lena", "de")):
            member = await host.member(username, locale=locale)
            await member.chat("Pears and plums")
            await member.chat("Plums in the garden")
        said = {
            "kim": ("Search conversations", "1 conversation found.", "2 conversations found.", "No conversation matches “cherries”."),
            "lena": ("Gespräche durchsuchen", "1 Gespräch gefunden.", "2 Gespräche gefunden.", "Kein Gespräch passt zu „cherries“."),
        }
        for username, (label, one, two, none) in said.items():
            page = await browser_pages.new(host.url)
            await sign_in(page, username, MEMBER_PASSWORD)
            sidebar = page.locator(".conv-sidebar")
            search = page.get_by_role("searchbox", name=label)
            await search.fill("pears")
            await expect(sidebar.get_by_role("status").filter(has_text=one)).to_have_count(1)
            await search.fill("plums")
            await expect(sidebar.get_by_role("status").filter(has_text=two)).to_have_count(1)
            await search.fill("cherries")
            await expect(sidebar.get_by_role("status").filter(has_text=none)).to_have_count(1)
            await search.fill("")
            await expect(sidebar.get_by_role("status").filter(has_text=none)).to_have_count(0)


async def test_each_message_is_named_by_who_wrote_it_and_its_copy_button_says_what_it_copies(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        server.responder = lambda request: Reply(text="Fine, thanks.")
        for username, locale in (("mona", "en"), ("nils", "de")):
            await host.member(username, locale=locale)
        names = {"mona": ("Message", "You", "Assistant", "Copy your message", "Copy the answer"),
                 "nils": ("Nachricht", "Du", "Assistent", "Deine Nachricht kopieren", "Antwort kopieren")}
        for username, (box, you, assistant, copy_mine, copy_answer) in names.items():
            page = await browser_pages.new(host.url)
            await sign_in(page, username, MEMBER_PASSWORD)
            await page.get_by_role("textbox", name=box, exact=True).fill("How are you?")
            await page.get_by_role("textbox", name=box, exact=True).press("Enter")
            answer = page.get_by_role("article", name=assistant, exact=True)
            await expect(answer).to_have_attribute("data-status", "complete")
            await expect(answer.get_by_role("button", name=copy_answer, exact=True)).to_have_count(1)
            mine = page.get_by_role("article", name=you, exact=True)
            await expect(mine).to_contain_text("How are you?")
            await expect(mine.get_by_role("button", name=copy_mine, exact=True)).to_have_count(1)
            await page.reload()  # drawn from history alike
            await expect(page.get_by_role("article", name=you, exact=True).get_by_role("button", name=copy_mine, exact=True)).to_have_count(1)
            await expect(page.get_by_role("article", name=assistant, exact=True).get_by_role("button", name=copy_answer, exact=True)).to_have_count(1)
            await assert_no_violations(page, f"conversation of {username}")


async def test_all_conversations_on_a_phone_returns_the_focus_to_the_entry_it_came_from(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        server.responder = lambda request: Reply(text="Sure.")
        member = await host.member("otto")
        await member.chat("About the garden")
        await member.chat("About the kitchen")
        await member.chat("About the attic")
        page = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(page, "otto", MEMBER_PASSWORD)
        entry: Any = page.locator(".conv-list").get_by_role("link", name="About the kitchen")
        await entry.focus()
        await page.keyboard.press("Enter")
        await expect(page.get_by_role("heading", name="About the kitchen")).to_be_visible()
        back = page.get_by_role("link", name="All conversations")
        await back.focus()
        await page.keyboard.press("Enter")
        await expect(page.locator(".conv-list").get_by_role("link", name="About the kitchen")).to_be_focused()
