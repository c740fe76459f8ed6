"""A newcomer's walk (an Open WebUI user): a new conversation's header takes the title
its first message gave even while a search hides it from the list, a search result's
snippet is plain words with the matched ones marked (accents folded), and the keyboard
shortcuts such a member expects (new conversation, search, message box, their help)."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in, stored_conversation
from .test_accessibility import assert_no_violations, sign_in_german
from .test_chat import MODEL, configure_model, send

#: The one conversation read (not the list, not its sub-resources).
ONE_CONVERSATION = re.compile(r"/api/conversations/[^/?]+(\?.*)?$")


async def test_a_new_conversations_title_reaches_its_header_while_a_search_hides_it(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        member = await host.member("alice", display_name="Alice")
        await stored_conversation(host, member.member["id"], "Penguins at dusk", [("user", "Where do penguins sleep?"), ("assistant", "On the ice.")])
        await stored_conversation(host, member.member["id"], "Something else", [("user", "Hello"), ("assistant", "Hi.")])
        server.responder = lambda request: Reply(text="Rhubarb is a vegetable.")
        page = await browser_pages.new(host.url)
        await sign_in(page, "alice", MEMBER_PASSWORD)

        # The conversation read as the message is still being written (the race the
        # walk hit 2 of 8 times): untitled. Only the server's word can name it now.
        async def untitled(route: Any) -> None:
            response = await route.fetch()
            body = await response.json()
            if route.request.method == "GET" and "conversation" in body:
                body["conversation"]["title"] = ""
            await route.fulfill(response=response, body=json.dumps(body))

        await page.route(ONE_CONVERSATION, untitled)
        search = page.get_by_role("searchbox", name="Search conversations")
        await expect(page.locator(".conv-list li")).to_have_count(2)
        await search.fill("penguins")
        await expect(page.locator(".conv-list li")).to_have_count(1)
        await page.get_by_role("button", name="New conversation").click()
        await send(page, "Tell me about rhubarb")
        await page.wait_for_url("**/#chat/*")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Rhubarb is a vegetable.")
        await expect(page.locator(".conv-heading")).to_have_text("Tell me about rhubarb")
        await expect(page).to_have_title(re.compile(r"^Tell me about rhubarb · "))
        # The search and its results stay as they were.
        await expect(search).to_have_value("penguins")
        await expect(page.locator(".conv-list li")).to_have_count(1)


ANSWER = (
    "## Area\n\nThe **integral** $$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$ is what we computed at the **Café** "
    "<img src=x onerror=alert(1)> on the Straße."
)


async def test_a_search_results_snippet_is_plain_words_with_the_matched_ones_marked(skald, browser_pages):
    host = await skald.start()
    member = await host.member("dora")
    await stored_conversation(host, member.member["id"], "Maths", [("user", "What did we compute?"), ("assistant", ANSWER)])
    await stored_conversation(host, member.member["id"], "Something else", [("user", "Hello"), ("assistant", "Hi.")])
    page = await browser_pages.new(host.url)
    await sign_in(page, "dora", MEMBER_PASSWORD)
    await expect(page.locator(".conv-list li")).to_have_count(2)
    await page.get_by_role("searchbox", name="Search conversations").fill("cafe strasse")
    await expect(page.locator(".conv-list li")).to_have_count(1)
    snippet = page.locator(".conv-list .conv-snippet")
    # Accents folded ("cafe" found "Café", "strasse" "Straße"): the words as written are marked.
    await expect(snippet.locator("mark")).to_have_text(["Café", "Straße"])
    text = await snippet.text_content()
    for syntax in ("$$", "**", "#"):
        assert syntax not in text, (syntax, text)
    assert await page.locator(".conv-list img").count() == 0  # the words are text, never markup

    # The math's TeX as written: its thin space is not a comma.
    await page.get_by_role("searchbox", name="Search conversations").fill("integral")
    await expect(snippet.locator("mark")).to_have_text(["integral"])
    await expect(snippet).to_contain_text("\\int_0^1 x^2\\,dx")
    await expect(snippet).not_to_contain_text("$$")

    # Opened, the message marks the words too (in its rendered text, not in its math).
    await page.get_by_role("searchbox", name="Search conversations").fill("cafe")
    await expect(snippet.locator("mark")).to_have_text(["Café"])
    await page.locator(".conv-list a").first.click()
    hit = page.locator(".msg.assistant", has_text="integral")
    await expect(hit).to_be_focused()
    await expect(hit.locator("mark.search-word")).to_have_text(["Café"])
    await expect(hit.locator(".msg-body")).to_contain_text("what we computed at the Café")


async def member_with_a_conversation(skald: Any, browser_pages: Any, **page: Any) -> tuple[Any, Any]:
    """Dora signed in, with one conversation ("Penguins") open: the host and her page."""
    host = await skald.start()
    member = await host.member("dora")
    conversation_id = await stored_conversation(host, member.member["id"], "Penguins", [("user", "Where do penguins sleep?"), ("assistant", "On the ice.")])
    browser = await browser_pages.new(host.url, **page)
    await sign_in(browser, "dora", MEMBER_PASSWORD)
    await browser.goto(f"/#chat/{conversation_id}")
    await expect(browser.locator(".msg.assistant .msg-body")).to_have_text("On the ice.")
    return host, browser


async def test_ctrl_shift_o_opens_a_new_conversation_from_a_conversation_and_from_another_page(skald, browser_pages):
    _, page = await member_with_a_conversation(skald, browser_pages)
    box = page.get_by_role("textbox", name="Message")
    await box.fill("half a thought")  # a Ctrl shortcut acts while the member types too
    await page.keyboard.press("Control+Shift+O")
    await page.wait_for_url(re.compile(r"#chat$"))
    await expect(box).to_be_focused()
    await expect(box).to_have_value("")
    await page.goto("/#memory")
    await expect(page.get_by_role("heading", name="Memory", exact=True)).to_be_visible()
    await page.keyboard.press("Control+Shift+O")
    await page.wait_for_url(re.compile(r"#chat$"))
    await expect(box).to_be_focused()
    # Pressed at once, while the chat screen is still in the page: it acts for the route
    # being opened, not for the screen being left (which would only focus its box).
    await page.goto("/#memory")
    await page.keyboard.press("Control+Shift+O")
    await page.wait_for_url(re.compile(r"#chat$"))
    await expect(box).to_be_focused()


async def test_ctrl_k_and_slash_focus_the_search_but_slash_stays_text_in_a_field(skald, browser_pages):
    _, page = await member_with_a_conversation(skald, browser_pages)
    search = page.get_by_role("searchbox", name="Search conversations")
    box = page.get_by_role("textbox", name="Message")
    await box.focus()
    await page.keyboard.type("either/or")  # "/" typed in the message box is text
    await expect(box).to_have_value("either/or")
    await expect(box).to_be_focused()
    await page.keyboard.press("Control+k")
    await expect(search).to_be_focused()
    await page.locator(".msg.assistant").click()  # the focus out of any field
    await page.keyboard.press("/")
    await expect(search).to_be_focused()
    await expect(search).to_have_value("")  # the "/" was the shortcut's, not typed in it
    # On a phone the list is not beside the conversation: the shortcut goes to it.
    opened = page.url
    await page.set_viewport_size({"width": 390, "height": 844})
    await page.goto(opened)
    await expect(page.locator(".msg.assistant .msg-body")).to_have_text("On the ice.")
    await expect(search).to_be_hidden()
    await page.keyboard.press("Control+k")
    await page.wait_for_url(re.compile(r"#chat$"))
    await expect(search).to_be_focused()


async def test_shift_escape_and_ctrl_shift_semicolon_focus_the_message_box(skald, browser_pages):
    _, page = await member_with_a_conversation(skald, browser_pages)
    box = page.get_by_role("textbox", name="Message")
    search = page.get_by_role("searchbox", name="Search conversations")
    await page.locator(".conv-heading").click()
    await page.keyboard.press("Shift+Escape")
    await expect(box).to_be_focused()
    await search.focus()
    await page.keyboard.press("Shift+Escape")  # not a Ctrl key: the field keeps it
    await expect(search).to_be_focused()
    await page.keyboard.press("Control+Shift+Semicolon")
    await expect(box).to_be_focused()


async def test_ctrl_slash_shows_the_shortcuts_in_a_dialog_that_keeps_and_returns_the_focus(skald, browser_pages):
    _, page = await member_with_a_conversation(skald, browser_pages)
    box = page.get_by_role("textbox", name="Message")
    await box.focus()
    await page.keyboard.press("Control+Slash")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    await expect(dialog).to_be_visible()
    await expect(dialog).to_contain_text("Ctrl + Shift + O")
    await expect(dialog).to_contain_text("Ctrl + K or /")
    close = dialog.get_by_role("button", name="Close")
    await expect(close).to_be_focused()
    await assert_no_violations(page, "shortcuts help")
    for key in ("Tab", "Shift+Tab", "Tab"):
        await page.keyboard.press(key)
        await expect(close).to_be_focused()  # round the dialog, never out of it
    await page.keyboard.press("Control+Shift+O")  # the page behind takes no shortcut meanwhile
    await expect(dialog).to_be_visible()
    await page.keyboard.press("Escape")
    await expect(dialog).to_have_count(0)
    await expect(box).to_be_focused()
    assert re.search(r"#chat/", page.url)
    # Close returns the focus alike.
    await page.keyboard.press("Control+Slash")
    await dialog.get_by_role("button", name="Close").click()
    await expect(dialog).to_have_count(0)
    await expect(box).to_be_focused()


async def test_the_shortcuts_help_speaks_german(skald, browser_pages):
    host = await skald.start()
    await host.create_member("erin", display_name="Erin")
    admin = await host.admin()
    member = (await admin.get("/api/admin/members")).json()
    erin = next(m for m in (member.get("members") or member) if m["username"] == "erin")
    assert (await admin.patch(f"/api/admin/members/{erin['id']}", json={"locale": "de"})).status_code == 200
    page = await browser_pages.new(host.url, locale="de-DE")
    await sign_in_german(page)
    await page.keyboard.press("Control+Slash")
    dialog = page.get_by_role("dialog", name="Tastenkürzel")
    await expect(dialog).to_contain_text("Strg + Umschalt + O")
    await expect(dialog.get_by_role("button", name="Schließen")).to_be_focused()
    await assert_no_violations(page, "shortcuts help de")
