"""What a keyboard-only German screen-reader probe met: a new conversation's first
approval arrived unsaid (its log and status line were attached already holding it),
switching answer versions said nothing of which version showed, a tool's failure text
for the model stood raw in English in the German transcript, built-in plugins' headings
sat at their section heading's level, and Escape did not close the export menu."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from playwright.async_api import expect

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo, Tool, ToolError
from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in
from .test_accessibility import assert_no_violations
from .test_chat_transcript_accessibility import WCAG_ONLY
from .test_chat import MODEL, NotesPlugin, configure_model, send

#: What a screen reader hears of the live regions: text put in a `.turn-status` line or
#: rows added to a `[role=log]` only once the region has been in the document for a
#: frame. A region inserted already holding text is recorded as `born`, not as said.
LIVE_PROBE = """(() => {
  let frame = 0;
  const tick = () => { frame += 1; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  const since = new WeakMap();  // region -> the frame it was attached in
  window.__probe = { said: [], born: [] };
  const regions = (node) => node.nodeType !== Node.ELEMENT_NODE ? []
    : [...(node.matches(".turn-status, [role=log]") ? [node] : []), ...node.querySelectorAll(".turn-status, [role=log]")];
  new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.addedNodes) {
        for (const region of regions(node)) {
          since.set(region, frame);
          if (region.textContent.trim()) window.__probe.born.push(region.textContent.trim().slice(0, 200));
        }
      }
      const target = record.target.nodeType === Node.ELEMENT_NODE ? record.target : record.target.parentElement;
      const region = target?.closest(".turn-status, [role=log]");
      if (!region || !since.has(region) || since.get(region) >= frame) continue;
      if (region.matches(".turn-status")) window.__probe.said.push(region.textContent.trim());
      else for (const node of record.addedNodes) if (node.textContent?.trim()) window.__probe.said.push(node.textContent.trim().slice(0, 200));
    }
  }).observe(document, { childList: true, subtree: true, characterData: true });
})();"""


async def test_a_new_conversations_first_approval_is_said_in_live_regions_already_attached(skald, browser_pages):
    notes = NotesPlugin()
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[notes], enable=["notes"])
        await configure_model(await host.admin(), server)
        await host.create_member("greta", locale="de")
        server.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"path": "notes/milch.txt", "text": "Milch"})]), Reply(text="Notiert.")])
        page = await browser_pages.new(host.url)
        await page.add_init_script(LIVE_PROBE)
        await sign_in(page, "greta", MEMBER_PASSWORD)
        await page.get_by_role("button", name="Neues Gespräch").or_(page.get_by_role("link", name="Neues Gespräch")).first.click()

        # The new conversation's page reads it once the approval waits: what it shows
        # then came with the read, not as live events.
        async def late(route: Any) -> None:
            if route.request.method == "GET":
                await asyncio.sleep(1.5)
            await route.continue_()

        await page.route(re.compile(r"/api/conversations/[^/?]+(\?.*)?$"), late)
        box = page.get_by_role("textbox", name="Nachricht")
        await box.fill("Merk dir: Milch kaufen")
        await box.press("Enter")
        approval = page.get_by_role("group", name="Freigabe für write_note").or_(page.locator(".approval")).first
        await expect(approval).to_be_visible()
        waiting = "Der Assistent wartet auf deine Zustimmung."
        await page.wait_for_function("(text) => window.__probe.said.includes(text)", arg=waiting, timeout=5_000)
        said = await page.evaluate("window.__probe.said")
        assert any("write_note" in text for text in said), said  # the approval card, added to the live log
        await expect(page.locator(".turn-status")).to_have_text(waiting)
        assert notes.calls == []


async def test_switching_versions_says_which_version_shows_in_english_and_german(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        said = {"en": ("liv", "Message", "Regenerate", "Versions from here on", "Previous version", "Next version", "Version {n} of 2"),
                "de": ("lene", "Nachricht", "Neu erzeugen", "Versionen ab hier", "Vorherige Version", "Nächste Version", "Version {n} von 2")}
        for locale, (username, message, regenerate_name, group_name, previous_name, next_name, version) in said.items():
            await host.create_member(username, locale=locale)
            server.script(MODEL, [Reply(text="Answer one."), Reply(text="Answer two.")])
            page = await browser_pages.new(host.url)
            await sign_in(page, username, MEMBER_PASSWORD)
            box = page.get_by_role("textbox", name=message)
            await box.fill("Tell me")
            await box.press("Enter")
            answers = page.locator(".msg.assistant")
            await expect(answers.last.locator(".msg-body")).to_have_text("Answer one.")
            await page.get_by_role("button", name=regenerate_name).click()
            await expect(answers.last.locator(".msg-body")).to_have_text("Answer two.")
            versions = answers.last.get_by_role("group", name=group_name)
            await expect(versions).to_have_accessible_description(version.format(n=2))
            await versions.get_by_role("button", name=previous_name).focus()
            await page.keyboard.press("Enter")
            await expect(answers.last.locator(".msg-body")).to_have_text("Answer one.")
            await expect(versions.get_by_role("button", name=next_name)).to_be_focused()
            await expect(page.locator(".version-status[role=status]")).to_have_text(version.format(n=1))
            await expect(versions).to_have_accessible_description(version.format(n=1))
            await page.keyboard.press("Enter")
            await expect(answers.last.locator(".msg-body")).to_have_text("Answer two.")
            await expect(page.locator(".version-status[role=status]")).to_have_text(version.format(n=2))
            await assert_no_violations(page, f"the version switch ({locale})")


class FailingReminder:
    """A tool whose failure is worded for the model, as the host's own tools word theirs."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="reminder", title="Reminder", description="Reminds.", spec=">=1.0,<2")

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def remind(args: Any, ctx: Any) -> str:
            raise ToolError("'at' must be non-empty text")

        register(Tool("remind", "Remind the member at a time.", {"type": "object", "properties": {"at": {"type": "string"}}}, remind))


async def test_a_tools_failure_for_the_model_is_said_in_the_readers_words_its_text_kept_apart(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[FailingReminder()], enable=["reminder"])
        await configure_model(await host.admin(), server)
        await host.create_member("berta", locale="de")
        server.script(MODEL, [Reply(tool_calls=[ToolCall("remind", {"at": ""})]), Reply(text="Das ging nicht.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "berta", MEMBER_PASSWORD)
        box = page.get_by_role("textbox", name="Nachricht")
        await box.fill("Erinnere mich.")
        await box.press("Enter")
        allow = page.get_by_role("button", name="Erlauben")
        failed = page.locator(".tool-card .badge.tool-error")
        await expect(failed.or_(allow).first).to_be_visible()
        if await allow.is_visible():
            await allow.click()
        for _ in range(2):  # live, then as a reload reads it
            card = page.locator(".tool-card").first
            await expect(card.locator(".badge")).to_have_text("Fehlgeschlagen")
            await card.locator("summary").first.click()
            body = card.locator(".tool-body")
            await expect(body.get_by_text("Das Werkzeug ist fehlgeschlagen; der Assistent hat erfahren, warum.")).to_be_visible()
            raw = "Error: 'at' must be non-empty text"
            await expect(body.get_by_text(raw)).to_be_hidden()  # not in the German text the member reads
            told = body.locator("details.tool-told-details")
            await told.get_by_text("Nachricht an den Assistenten").click()
            await expect(told.get_by_role("region", name="Nachricht von remind an den Assistenten")).to_have_text(raw)
            await assert_no_violations(page, "a failed tool's card", WCAG_ONLY)  # a card's h4 under the h1 is the page's as before
            await page.reload()
        tool = [m["content"] for m in server.requests_for(MODEL)[-1].messages if m["role"] == "tool"]
        assert tool == ["Error: 'at' must be non-empty text"]  # what the model read, untouched


async def test_built_in_plugins_headings_sit_one_level_under_their_section(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    section = page.get_by_role("heading", level=2, name="Built in")
    await expect(section).to_be_visible()
    builtin = page.locator("article.plugin-card", has=page.locator(".tag", has_text="Built in"))
    await expect(builtin.first).to_be_visible()
    count = await builtin.count()
    assert count >= 2
    assert await builtin.locator("h3").count() == count
    assert await builtin.locator("h2").count() == 0
    await assert_no_violations(page, "the plugins page")


async def test_escape_closes_the_export_menu_and_returns_to_its_button(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("otto")
        server.script(MODEL, [Reply(text="Hello.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "otto", MEMBER_PASSWORD)
        await send(page, "Hi")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Hello.")
        menu = page.locator("details.conv-export")
        summary = menu.locator("summary")
        # From the button itself, and from a link in the open menu.
        for inside in (False, True):
            await summary.focus()
            await page.keyboard.press("Enter")
            await expect(menu).to_have_attribute("open", "")
            if inside:
                await page.keyboard.press("Tab")
                await expect(menu.get_by_role("link", name="Markdown")).to_be_focused()
            await page.keyboard.press("Escape")
            await expect(menu).not_to_have_attribute("open", "")
            await expect(summary).to_be_focused()
