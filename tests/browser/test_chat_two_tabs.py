"""One member, two tabs of one session on the same conversation: what is done in one
tab shows in the other without a reload, exactly as a reload would show it: a
regenerated answer with its versions, an edited message's branch (and a follow-up
typed there goes under that branch), a new title (heading, page title, list), another
model in the picker, and a deletion (the list lets it go; the tab showing it goes to
the start page, which says so)."""

from __future__ import annotations

import itertools
import re
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .test_chat import MODEL, add_model, configure_model, send
from .kit import sign_in

#: What a tab shows of its conversation: each message's role, text and version switcher.
SHOWN = """() => [...document.querySelectorAll('.transcript .msg.user, .transcript .msg.assistant')].map((m) => [
  m.classList.contains('user') ? 'user' : 'assistant',
  (m.querySelector('.bubble .plain, .msg-body')?.textContent || '').trim(),
  m.querySelector('.versions .version-at')?.textContent || '',
])"""

#: Long enough that the transcript scrolls.
LINES = "\n\n".join(f"Line {n} of the answer." for n in range(40))


async def as_reloaded(browser_pages: Any, page: Any) -> list[Any]:
    """What a fresh tab shows of ``page``'s conversation (a reload, without touching ``page``)."""
    fresh = await browser_pages.new_tab(page)
    await expect(fresh.locator(".transcript .msg.assistant").last).to_have_attribute("data-status", "complete")
    await expect(fresh.locator(".chat-page.running")).to_have_count(0)
    shown = await fresh.evaluate(SHOWN)
    await fresh.close()
    return shown


async def agrees_with_a_reload(browser_pages: Any, page: Any) -> None:
    expected = await as_reloaded(browser_pages, page)
    await expect(page.locator(".chat-page.running")).to_have_count(0)
    shown = None
    for _ in range(50):  # the second read after the answer (its versions) may still be on its way
        shown = await page.evaluate(SHOWN)
        if shown == expected:
            return
        await page.wait_for_timeout(100)
    assert shown == expected


@dataclass
class Tabs:
    host: Any
    server: ScriptedModelServer
    a: Any  # the tab that opened the conversation
    b: Any  # a second tab of the same session on it
    conversation: str
    other_model: dict[str, Any]


@asynccontextmanager
async def two_tabs(skald: Any, browser_pages: Any) -> AsyncIterator[Tabs]:
    """A member's conversation of two exchanges ("Warm up", "A haiku, please"; each
    answer "Take <n>: <message>" and long enough to scroll), open in two tabs of one
    session; two models, so that the picker shows."""
    async with ScriptedModelServer(models=(MODEL, "other-model"), api_key="sk-test") as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_model(admin, server)
        other = await add_model(admin, "other-model", "Other")
        await host.create_member("tess")
        takes = itertools.count(1)
        server.responder = lambda request: Reply(text=f"Take {next(takes)}: {request.last_user_text}\n\n{LINES}")
        a = await browser_pages.new(host.url)
        await sign_in(a, "tess", MEMBER_PASSWORD)
        await send(a, "Warm up")
        await a.wait_for_url("**/#chat/*")
        await expect(a.locator(".msg.assistant .msg-body")).to_contain_text("Take 1: Warm up")
        await send(a, "A haiku, please")
        await expect(a.locator(".msg.assistant .msg-body").last).to_contain_text("Take 2: A haiku, please")
        await expect(a.locator(".msg.assistant").last).to_have_attribute("data-status", "complete")
        b = await browser_pages.new_tab(a)
        await expect(b.locator(".msg.assistant .msg-body").last).to_contain_text("Take 2: A haiku, please")
        yield Tabs(host, server, a, b, a.url.rsplit("/", 1)[-1], other)


async def test_a_regenerate_and_a_version_chosen_in_one_tab_show_in_the_other(skald, browser_pages):
    async with two_tabs(skald, browser_pages) as tabs:
        a, b = tabs.a, tabs.b
        # A shows the new answer in place of the old one, with the switcher. A's reader,
        # scrolled up (in the first answer), stays where they were; their draft stays.
        await a.locator(".transcript").evaluate("(n) => { n.scrollTop = 300; n.dispatchEvent(new Event('scroll')); }")
        await a.get_by_role("textbox", name="Message").fill("half a thought")
        await b.get_by_role("button", name="Regenerate").click()
        await expect(b.locator(".msg.assistant .msg-body").last).to_contain_text("Take 3: A haiku, please")
        await expect(b.get_by_role("group", name="Versions from here on")).to_contain_text("2 / 2")
        await expect(a.locator(".msg.assistant")).to_have_count(2)
        await expect(a.locator(".msg.assistant .msg-body").last).to_contain_text("Take 3: A haiku, please")
        await expect(a.get_by_role("group", name="Versions from here on")).to_contain_text("2 / 2")
        await agrees_with_a_reload(browser_pages, a)
        assert await a.locator(".transcript").evaluate("(n) => n.scrollTop") == 300
        await expect(a.get_by_role("textbox", name="Message")).to_have_value("half a thought")

        # A version flipped to in B shows in A too.
        await b.get_by_role("group", name="Versions from here on").get_by_role("button", name="Previous version").click()
        await expect(b.get_by_role("group", name="Versions from here on")).to_contain_text("1 / 2")
        await expect(a.get_by_role("group", name="Versions from here on")).to_contain_text("1 / 2")
        await expect(a.locator(".msg.assistant .msg-body").last).to_contain_text("Take 2: A haiku, please")
        await agrees_with_a_reload(browser_pages, a)
        # B, which flipped it, kept the focus on the switcher (its own change is not read twice).
        await expect(b.get_by_role("group", name="Versions from here on").get_by_role("button", name="Next version")).to_be_focused()


async def test_an_edit_in_one_tab_shows_in_the_other_and_a_follow_up_there_goes_under_it(skald, browser_pages):
    async with two_tabs(skald, browser_pages) as tabs:
        a, b = tabs.a, tabs.b
        await a.get_by_role("textbox", name="Message").fill("half a thought")
        await b.locator(".msg.user").last.get_by_role("button", name="Edit").click()
        await b.get_by_role("textbox", name="Edit your message").fill("A limerick, please")
        await b.get_by_role("button", name="Send edited").click()
        await expect(b.locator(".msg.assistant .msg-body").last).to_contain_text("Take 3: A limerick, please")
        # A shows the edited message's branch, not the old question and its answer.
        await expect(a.locator(".msg.user .bubble")).to_have_text(["Warm up", "A limerick, please"])
        await expect(a.locator(".msg.assistant")).to_have_count(2)
        await expect(a.locator(".msg.assistant .msg-body").last).to_contain_text("Take 3: A limerick, please")
        await expect(a.locator(".msg.user").get_by_role("group", name="Versions from here on")).to_contain_text("2 / 2")
        await agrees_with_a_reload(browser_pages, a)
        await expect(a.get_by_role("textbox", name="Message")).to_have_value("half a thought")

        # A follow-up typed in A goes under the branch A shows (B's), and B sees it.
        await send(a, "And another")
        await expect(a.locator(".msg.assistant .msg-body").last).to_contain_text("Take 4: And another")
        await expect(b.locator(".msg.assistant .msg-body").last).to_contain_text("Take 4: And another")
        sent = [m["content"] for m in tabs.server.requests_for(MODEL)[-1].messages if m["role"] == "user"]
        assert sent == ["Warm up", "A limerick, please", "And another"], sent
        await agrees_with_a_reload(browser_pages, b)


async def test_a_rename_and_a_model_chosen_in_one_tab_show_in_the_other(skald, browser_pages):
    async with two_tabs(skald, browser_pages) as tabs:
        a, b = tabs.a, tabs.b
        # B's heading, page title and list follow.
        await a.get_by_role("button", name="Rename").click()
        await a.get_by_role("textbox", name="Title").fill("Poems")
        await a.get_by_role("button", name="Save").click()
        await expect(a.get_by_role("heading", level=1)).to_have_text("Poems")
        await expect(b.get_by_role("heading", level=1)).to_have_text("Poems")
        await expect(b).to_have_title(re.compile(r"^Poems · "))
        await expect(b.locator(f".conv-list li[data-conversation-id='{tabs.conversation}'] .conv-title")).to_have_text("Poems")

        # B's picker shows the model chosen in A, and the automatic choice again.
        await a.get_by_label("Model", exact=True).select_option(label="Other")
        await expect(b.get_by_label("Model", exact=True)).to_have_value(tabs.other_model["id"])
        await a.get_by_label("Model", exact=True).select_option(index=0)
        await expect(b.get_by_label("Model", exact=True)).to_have_value("")
        await b.reload()  # as stored
        await expect(b.get_by_role("heading", level=1)).to_have_text("Poems")
        await expect(b.get_by_label("Model", exact=True)).to_have_value("")


async def test_a_deletion_in_one_tab_shows_in_the_other(skald, browser_pages):
    async with two_tabs(skald, browser_pages) as tabs:
        a, b = tabs.a, tabs.b
        # Another conversation goes from B's list while B stays where it is.
        member = await tabs.host.member("tess")
        spare = (await member.post("/api/conversations", json={"title": "Spare"})).json()["id"]
        search = b.get_by_role("searchbox", name="Search conversations")
        await search.fill("Spare")
        spare_item = b.locator(f".conv-list li[data-conversation-id='{spare}']")
        await expect(spare_item).to_have_count(1)
        assert (await member.delete(f"/api/conversations/{spare}")).status_code == 200
        await expect(spare_item).to_have_count(0)
        await search.fill("")
        await expect(b.locator(f".conv-list li[data-conversation-id='{tabs.conversation}']")).to_have_count(1)
        assert b.url.endswith(tabs.conversation)

        # The one B shows takes B to the start page, which says why; what B had typed stays.
        await b.get_by_role("textbox", name="Message").fill("unsent words")
        await a.get_by_role("button", name="Delete").click()
        await a.get_by_role("dialog").get_by_role("button", name="Delete").click()
        await expect(a.get_by_role("heading", name="Hello, tess")).to_be_visible()
        await expect(b.get_by_role("heading", name="Hello, tess")).to_be_visible()
        assert b.url.endswith("#chat")
        await expect(b.get_by_role("status").filter(has_text="This conversation was deleted in another window or on another device.")).to_be_visible()
        await expect(a.locator(".deleted-elsewhere")).to_have_count(0)  # A deleted it itself: no news to it
        for tab in (a, b):
            await expect(tab.locator(f".conv-list li[data-conversation-id='{tabs.conversation}']")).to_have_count(0)
            await expect(tab.get_by_text("No conversations yet.")).to_be_visible()
        await expect(b.get_by_role("textbox", name="Message")).to_have_value("unsent words")
