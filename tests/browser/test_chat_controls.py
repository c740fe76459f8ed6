"""Issue 19 in the browser: the controls (rendering, copy, export, theme, Retry) and
the bugs (setup language, header title, failing plugin card), and the keyboard paths
that used to drop focus on <body>."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from playwright.async_api import expect

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField
from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import PHONE, PagePlugin, screenshot, sign_in
from .test_accessibility import RICH_ANSWER
from .test_chat import MODEL, NotesPlugin, add_model, configure_model, send

FOCUSED = "() => { const a = document.activeElement; return a ? [a.tagName, a.className, a.getAttribute('aria-label') || a.textContent.slice(0, 40)] : null; }"


async def outline(page: Any, selector: str) -> str:
    return await page.evaluate(f"getComputedStyle(document.querySelector({json.dumps(selector)})).outlineStyle")


async def test_rendering_copy_export_theme_and_the_header_title(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("fay", display_name="Fay")
        server.script(MODEL, [Reply(text=RICH_ANSWER, token_delay=0.03)])
        page = await browser_pages.new(host.url)
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        await sign_in(page, "fay", MEMBER_PASSWORD)
        await send(page, "Render everything please")
        # Streaming renders a finished block once: the heading, done when the paragraph
        # after it began, is the same node while the rest of the answer streams in.
        await page.wait_for_function("""() => {
            const h = document.querySelector(".msg.assistant.streaming .msg-body h2 + p");
            if (h) window.__heading = h.previousElementSibling;
            return Boolean(h);
        }""", polling=10)
        kept = await page.wait_for_function("""() => {
            const body = document.querySelector(".msg.assistant.streaming .msg-body");
            if (!body) return "ended before the table streamed";
            return body.querySelector("table") ? (body.querySelector("h2") === window.__heading ? "kept" : "rendered again") : null;
        }""", polling=10)
        assert await kept.json_value() == "kept"
        answer = page.locator(".msg.assistant").last
        await expect(answer).to_have_attribute("data-status", "complete")
        body = answer.locator(".msg-body")
        # The page's h1 is the conversation's title: "#" and "##" are both the level under
        # it ("##", the usual opening of an answer, skipped a level as h3: axe heading-order).
        await expect(body.locator("h2")).to_have_text(["A heading", "Second level"])
        await expect(body.locator("h3")).to_have_count(0)
        await expect(body.locator("table td").first).to_have_text("a")
        # The table scrolls in a named, focusable box (axe scrollable-region-focusable).
        table_box = body.get_by_role("region", name="Table")
        await expect(table_box.locator("table")).to_have_count(1)
        await expect(table_box).to_have_attribute("tabindex", "0")
        # "|---:|" right-aligns its column, through a class (no style gets past the sanitiser).
        await expect(body.locator("table td").nth(1)).to_have_css("text-align", "right")
        await expect(body.locator("table th").nth(1)).to_have_css("text-align", "right")
        # A column that names no side starts where the line does (left here, right in Arabic).
        await expect(body.locator("table td").first).to_have_css("text-align", "start")
        await expect(page.locator("html")).to_have_attribute("dir", "ltr")
        # HTML shown as text: its URL is linked up to the quote, not "…x.png%22%3E".
        shown = body.get_by_role("link", name="http://example.com/x.png", exact=True)
        await expect(shown).to_have_attribute("href", "http://example.com/x.png")
        await expect(body).to_contain_text('HTML stays text: <img src="http://example.com/x.png">')
        await expect(body.get_by_role("checkbox", name="done", exact=True)).to_be_checked()
        await expect(body.get_by_role("checkbox", name="open", exact=True)).not_to_be_checked()
        await expect(body.locator("code.language-python .hljs-keyword").first).to_have_text("def")
        await expect(body.locator(".katex-display .katex-mathml annotation")).to_have_text("\\sum_{n=1}^{10} n = 55")
        await expect(body.locator(".md-math:not(.display) .katex")).to_have_count(1)
        await expect(body.get_by_role("link", name="link")).to_have_attribute("rel", "noopener noreferrer")

        # Bug 5: the header shows the title the list shows, without a reload.
        await expect(page.locator(".conv-list a[aria-current=page]")).to_contain_text("Render everything please")
        await expect(page.get_by_role("heading", level=1)).to_have_text("Render everything please")

        await body.get_by_role("button", name="Copy code").click()
        await expect(body.get_by_role("button", name="Copied")).to_be_visible()
        assert await page.evaluate("navigator.clipboard.readText()") == "def f(x):\n    return x * 2  # double"
        await answer.locator("button.copy-message").click()
        assert await page.evaluate("navigator.clipboard.readText()") == RICH_ANSWER

        # Export: the member's own conversation, as Markdown and as JSON.
        await page.get_by_text("Export", exact=True).click()
        async with page.expect_download() as info:
            await page.get_by_role("link", name="Markdown (.md)").click()
        download = await info.value
        text = open(await download.path(), encoding="utf-8").read()
        assert download.suggested_filename == "Render-everything-please.md"
        assert "## You\n\nRender everything please" in text and "| Name | Value | A long third heading" in text
        conversation = page.url.split("#chat/", 1)[1]
        exported = await page.evaluate(f"fetch('/api/conversations/{conversation}/export?format=json').then((r) => r.json())")
        assert [(m["role"], m["content"]) for m in exported["messages"]] == [("user", "Render everything please"), ("assistant", RICH_ANSWER)]
        other = await (await host.member("gus")).get(f"/api/conversations/{conversation}/export?format=json")
        assert other.status_code == 404  # another member's id resolves to nothing
        await screenshot(page, "chat-rendered")

        # Theme: chosen in the app, kept across a reload, whatever the system prefers.
        await page.emulate_media(color_scheme="light")
        await page.get_by_label("Theme").select_option("dark")
        await expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        await page.reload()
        await expect(page.locator("html")).to_have_attribute("data-theme", "dark")
        await expect(page.locator(".msg.assistant .katex-display")).to_be_visible()
        assert await page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == "rgb(23, 25, 28)"
        await screenshot(page, "chat-dark")
        elsewhere = await browser_pages.new(host.url)  # another browser: the member's choice follows them
        await sign_in(elsewhere, "fay", MEMBER_PASSWORD)
        await expect(elsewhere.locator("html")).to_have_attribute("data-theme", "dark")
        await page.get_by_label("Theme").select_option("system")
        await expect(page.locator("html")).not_to_have_attribute("data-theme", "dark")
        assert await page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == "rgb(245, 244, 240)"


async def test_keyboard_focus_never_drops_to_body(skald, browser_pages):
    notes = NotesPlugin()
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[notes], enable=["notes"])
        await configure_model(await host.admin(), server)
        await host.create_member("hal")
        server.script(MODEL, [
            Reply(tool_calls=[ToolCall("write_note", {"path": "notes/a.txt", "text": "a"})]),
            Reply(text="Written."),
            Hang(text="slowly slowly slowly", token_delay=0.1),
        ])
        page = await browser_pages.new(host.url)
        await sign_in(page, "hal", MEMBER_PASSWORD)
        # A sign-in puts the focus in the message box (test_newcomer_keyboard_walk); after
        # a page load the skip link is the first stop and lands on <main>, which shows it.
        await page.reload()
        await expect(page.get_by_role("textbox", name="Message")).to_be_visible()
        await page.keyboard.press("Tab")
        skip = page.get_by_role("link", name="Skip to content")
        await expect(skip).to_be_focused()
        await page.keyboard.press("Enter")
        await expect(page.locator("main#content")).to_be_focused()
        assert await outline(page, "main#content") != "none"
        # The current page's nav link shows its focus ring like any other.
        await page.get_by_role("navigation").get_by_role("link", name="Chat").focus()
        await page.keyboard.press("Shift+Tab")
        await page.keyboard.press("Tab")
        assert await outline(page, "#sidebar a[aria-current=page]") != "none"

        order = """() => [...document.querySelectorAll('#content a[href], #content button:not([hidden]), #content textarea, #content input')]
            .filter((n) => n.offsetParent !== null).map((n) => n.closest('.conv-sidebar') ? 'list' : 'main')"""
        empty = await page.evaluate(order)
        await send(page, "Write a note")
        await page.wait_for_url("**/#chat/*")
        approval = page.get_by_role("group", name="Approval for write_note")
        await expect(approval).to_be_visible()
        opened = await page.evaluate(order)
        # The conversation list keeps its place in the tab order: before the chat, both times.
        assert empty.index("list") < empty.index("main") and opened.index("list") < opened.index("main"), (empty, opened)

        await approval.get_by_role("button", name="Approve").focus()
        await page.keyboard.press("Enter")
        await expect(page.locator(".approval-status")).to_have_text("Approved.")
        await expect(page.locator(".approval-status")).to_be_focused()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Written.")

        await send(page, "Now slowly")
        stop = page.get_by_role("button", name="Stop")
        await expect(page.locator(".msg.assistant.streaming")).to_be_visible()
        await stop.focus()
        await page.keyboard.press("Enter")
        await expect(stop).to_be_hidden()
        await expect(page.get_by_role("textbox", name="Message")).to_be_focused()


async def test_a_stopped_approval_the_export_menu_and_a_long_code_line(skald, browser_pages):
    """From the second browser probe: a card whose turn was stopped said "Approved." and
    dropped the focus; choosing an export dropped it too; on a phone one long code line
    made the whole transcript scroll sideways."""
    notes = NotesPlugin()
    long_line = "    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)  # " + "x" * 40
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[notes], enable=["notes"])
        await configure_model(await host.admin(), server)
        ivy = await host.member("ivy")
        server.script(MODEL, [
            Reply(tool_calls=[ToolCall("write_note", {"path": "notes/a.txt", "text": "a"})]),
            Reply(text=f"Here:\n\n```python\ndef fibonacci(n):\n{long_line}\n```\n\nDone."),
        ])
        page = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(page, "ivy", MEMBER_PASSWORD)
        await send(page, "Write a note")
        await page.wait_for_url("**/#chat/*")
        conversation = page.url.rsplit("/", 1)[-1]
        approval = page.get_by_role("group", name="Approval for write_note")
        await approval.get_by_role("button", name="Approve").focus()
        # Stopped elsewhere (another tab) while the card waits, its Approve button focused.
        assert (await ivy.post(f"/api/conversations/{conversation}/stop")).status_code == 200
        status = page.locator(".approval-status")
        await expect(status).to_have_text("No longer waiting for an answer.")
        await expect(status).to_be_focused()
        assert notes.calls == []

        await send(page, "Show me code")
        await expect(page.locator(".msg.assistant .msg-body").last).to_contain_text("Done.")
        sideways = await page.evaluate("(() => { const t = document.querySelector('.transcript') || document.querySelector('main'); return t.scrollWidth - t.clientWidth; })()")
        assert sideways <= 0, f"the transcript scrolls sideways by {sideways}px on a phone"
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width

        await page.set_viewport_size({"width": 1280, "height": 900})
        summary = page.locator(".conv-export summary")
        await summary.focus()
        await page.keyboard.press("Enter")
        markdown = page.get_by_role("link", name="Markdown")
        await markdown.focus()
        async with page.expect_download():
            await page.keyboard.press("Enter")
        await expect(summary).to_be_focused()

        # The dark theme's Delete in the confirm dialog: dark ink on its light red (axe).
        from .test_accessibility import assert_no_violations

        await page.evaluate("document.documentElement.dataset.theme = 'dark'")
        await page.get_by_role("button", name="Delete").first.click()
        await expect(page.get_by_role("dialog")).to_be_visible()
        await assert_no_violations(page, "the delete dialog, dark theme")


class NeedsToken(PagePlugin):
    """Like the Telegram plugin: starting without its token fails, saying so."""

    @hookimpl
    def startup(self, host: Any) -> None:
        raise RuntimeError("no bot token is configured: set one on the plugin's settings page")


async def test_setup_keeps_typed_fields_across_a_language_change_and_checks_them_first(skald, browser_pages):
    host = await skald.start(plugins=[NeedsToken("bot", title="Bot", config_schema=(ConfigField("token", "string", label="Token", required=True, secret=True),))])
    page = await browser_pages.new(host.url)
    await page.goto("/")
    await page.get_by_label("User name").fill("ada")
    await page.get_by_label("Display name").fill("Ada")
    await page.get_by_label("Password", exact=True).fill("short")
    await page.get_by_label("Language").select_option("de")
    await expect(page.get_by_role("heading", name="Willkommen bei Skald")).to_be_visible()
    await expect(page.get_by_label("Benutzername")).to_have_value("ada")
    await expect(page.get_by_label("Anzeigename")).to_have_value("Ada")
    await expect(page.get_by_label("Passwort", exact=True)).to_have_value("short")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url) if "/api/setup" in request.url and request.method == "POST" else None)
    await page.get_by_role("button", name="Administrator anlegen").click()
    password = page.get_by_label("Passwort", exact=True)
    await expect(password).to_have_attribute("aria-invalid", "true")
    await expect(password).to_have_accessible_description("Mindestens 8 Zeichen. Das Passwort braucht mindestens 8 Zeichen.")  # the rule, then the refusal
    await expect(password).to_be_focused()
    assert requests == []  # said before the server was asked
    await password.fill(ADMIN_PASSWORD)
    await page.get_by_label("Passwort wiederholen").fill(ADMIN_PASSWORD)
    await page.get_by_role("button", name="Administrator anlegen").click()
    await expect(page.get_by_role("heading", name="Hallo, Ada")).to_be_visible()

    # Bug 6: a plugin that cannot start without a setting says so on its card.
    await page.goto("/#plugins")
    card = page.locator("[data-plugin=bot]")
    await card.get_by_role("switch").check()
    # Its required token is unset: the host says so in the reader's language, naming it,
    # as a state to resolve (amber, announced politely), not as a failure.
    await expect(card.get_by_role("status")).to_contain_text("Braucht zuerst seine Einstellungen: Token.")
    await expect(card.locator(".btn.primary")).to_be_visible()  # the way to the settings stands out
    await page.reload()
    card = page.locator("[data-plugin=bot]")
    await expect(card.locator(".card-waiting")).to_contain_text("Braucht zuerst seine Einstellungen")
    await expect(card.locator(".card-problem")).to_have_count(0)
    await expect(card.locator(".health-dot.amber")).to_have_count(1)


async def test_a_turn_failed_without_a_model_offers_retry_that_answers_it_once(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        admin = await host.admin()
        await host.create_member("ivy")
        page = await browser_pages.new(host.url)
        await sign_in(page, "ivy", MEMBER_PASSWORD)
        await send(page, "Hello?")
        failed = page.locator(".msg.assistant[data-status=error]")
        await expect(failed.locator(".msg-body")).to_contain_text("No model is configured yet.")
        await configure_model(admin, server)
        server.script(MODEL, [Reply(text="Hello, Ivy.")])
        # Still failed, still offered for Retry; nothing ran by itself.
        await expect(failed.get_by_role("button", name="Retry")).to_be_visible()
        await expect(page.locator(".no-model")).to_be_visible()
        assert server.requests_for(MODEL) == []
        await failed.get_by_role("button", name="Retry").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Hello, Ivy.")
        await expect(page.locator(".no-model")).to_have_count(0)  # a model answered: the notice is past
        await expect(page.locator(".msg.assistant[data-status=error]")).to_have_count(0)
        await expect(page.locator(".msg.assistant")).to_have_count(1)
        assert len(server.requests_for(MODEL)) == 1


async def test_regenerate_an_answer_and_flip_between_its_versions(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("jo")
        server.script(MODEL, [Reply(text="First take."), Reply(text="Second take.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "jo", MEMBER_PASSWORD)
        await send(page, "A haiku, please")
        answer = page.locator(".msg.assistant")
        await expect(answer.locator(".msg-body")).to_have_text("First take.")
        await page.get_by_role("button", name="Regenerate").click()
        await expect(answer.last.locator(".msg-body")).to_have_text("Second take.")
        await expect(answer).to_have_count(1)
        versions = page.get_by_role("group", name="Versions from here on")
        await expect(versions).to_contain_text("2 / 2")
        await versions.get_by_role("button", name="Previous version").click()
        await expect(answer.locator(".msg-body")).to_have_text("First take.")
        await expect(versions).to_contain_text("1 / 2")
        await expect(versions.get_by_role("button", name="Next version")).to_be_focused()
        await page.reload()  # the version shown is stored, not only on screen
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("First take.")
        await expect(page.get_by_role("group", name="Versions from here on")).to_contain_text("1 / 2")
        assert len(server.requests_for(MODEL)) == 2

        # Edit the message: the conversation continues from the edited text, the old
        # branch (with both its answers) is a version at that message.
        server.script(MODEL, [Reply(text="A limerick.")])
        await page.locator(".msg.user").get_by_role("button", name="Edit").click()
        box = page.get_by_role("textbox", name="Edit your message")
        await expect(box).to_be_focused()
        await box.fill("A limerick, please")
        await page.get_by_role("button", name="Send edited").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("A limerick.")
        await expect(page.locator(".msg.assistant")).to_have_count(1)
        await expect(page.locator(".msg.user .bubble")).to_have_text("A limerick, please")
        at_message = page.locator(".msg.user").get_by_role("group", name="Versions from here on")
        await expect(at_message).to_contain_text("2 / 2")
        assert server.requests_for(MODEL)[-1].last_user_text == "A limerick, please"
        await at_message.get_by_role("button", name="Previous version").click()
        await expect(page.locator(".msg.user .bubble")).to_have_text("A haiku, please")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("First take.")
        # Back in the first branch, its own versions (the two takes) flip again.
        await expect(page.locator(".msg.assistant").get_by_role("group", name="Versions from here on")).to_contain_text("1 / 2")
        await expect(page.locator(".msg.user").get_by_role("group", name="Versions from here on")).to_contain_text("1 / 2")


async def test_the_model_picker_sends_the_conversation_to_the_chosen_model(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL, "other-model"), api_key="sk-test") as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_model(admin, server)
        other = await add_model(admin, "other-model", "Other")
        await add_model(admin, "third-model", "Third")  # the picker stays when Other goes
        await host.create_member("kim")
        server.responder = lambda request: Reply(text=f"{request.model} here.")
        page = await browser_pages.new(host.url)
        await sign_in(page, "kim", MEMBER_PASSWORD)
        await send(page, "Hi")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text(f"{MODEL} here.")
        await page.get_by_label("Model", exact=True).select_option(label="Other")
        chosen = page.get_by_role("status").filter(has_text="The next answer comes from this model")
        await expect(chosen).to_be_visible()
        await expect(chosen).to_have_attribute("aria-live", "polite")
        await send(page, "Again")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("other-model here.")
        # Said once: gone when that answer started, not news under the picker turn after turn.
        await expect(page.locator(".conv-header")).not_to_contain_text("The next answer comes from this model")
        # Chosen again and not followed by a message: it goes by itself after a few seconds.
        await page.get_by_label("Model", exact=True).select_option(index=0)
        await expect(chosen).to_be_visible()
        await expect(page.locator(".conv-header")).not_to_contain_text("The next answer comes from this model", timeout=12000)
        await page.get_by_label("Model", exact=True).select_option(label="Other")
        await expect(chosen).to_be_visible()  # saved: what the member sees before reloading
        # Each answer says which model wrote it by the label the member picked it by.
        await expect(page.locator(".msg.assistant .msg-meta .model").last).to_have_text("Other")
        await page.reload()
        await expect(page.get_by_label("Model", exact=True)).to_have_value(other["id"])
        await page.set_viewport_size(PHONE)  # the header with its picker, export and actions fits a phone
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("other-model here.")
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the conversation scrolls sideways on a phone ({width}px)"
        await screenshot(page, "chat-phone-picker", full_page=False)
        # The admin disables the model the conversation was sent to: the picker says so
        # instead of showing "Automatic", and the next answer comes from the automatic choice.
        disabled = await admin.patch(f"/api/admin/models/entries/{other['id']}", json={"enabled": False})
        assert disabled.status_code == 200, disabled.text
        await page.reload()
        picker = page.get_by_label("Model", exact=True)
        await expect(picker).to_have_value(other["id"])
        await expect(picker.locator("option:checked")).to_have_text("No longer available (answers come from the automatic choice)")
        await send(page, "Once more")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text(f"{MODEL} here.")


async def test_a_sub_agents_progress_shows_in_the_card_of_the_call_that_started_it(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("lou")
        words = " ".join(f"fact{n}" for n in range(30))
        server.script(MODEL, [
            Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Find the capital of Norway."})]),
            Reply(text=f"Oslo is the capital. {words}", token_delay=0.1),
            Reply(text="The researcher says: Oslo."),
        ])
        page = await browser_pages.new(host.url)
        await sign_in(page, "lou", MEMBER_PASSWORD)
        await send(page, "Capital of Norway?")
        approval = page.get_by_role("group", name="Approval for execute_task")
        card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="execute_task"))
        progress = card.get_by_role("group", name="Sub-agent researcher")
        await expect(progress.or_(approval).first).to_be_visible()
        if await approval.is_visible():
            await approval.get_by_role("button", name="Approve").click()
        await expect(progress).to_contain_text("is working…")
        await expect(progress.locator(".sub-text")).to_contain_text("Oslo is the capital")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("The researcher says: Oslo.")
        await expect(progress).to_contain_text("finished.")


async def test_a_stored_failure_reads_in_the_members_language_after_a_reload(skald, browser_pages):
    """A failed answer's reason is stored with its code: after a reload a German member
    reads it in German, as the live event showed it, never the English stored text."""
    host = await skald.start()
    await host.create_member("greta", locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "greta", MEMBER_PASSWORD)
    box = page.locator(".composer-input")
    await box.fill("Hallo?")
    await box.press("Enter")
    failed = page.locator(".msg.assistant[data-status=error] .msg-body")
    await expect(failed).to_have_text("Noch ist kein Modell eingerichtet. Ein Administrator kann eines auf der Seite Modelle hinzufügen.")
    await page.reload()
    await expect(failed).to_have_text("Noch ist kein Modell eingerichtet. Ein Administrator kann eines auf der Seite Modelle hinzufügen.")
    await expect(page.locator(".msg.assistant")).not_to_contain_text("No model")


async def test_a_message_just_sent_can_be_edited_without_a_reload(skald, browser_pages):
    """Edit appears once the message is stored (its ack), not only on messages loaded
    with the page: after a normal answer, and after Stop."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("ed")
        server.script(MODEL, [Reply(text="Fine."), Reply(text=" ".join(["slow"] * 200), token_delay=0.05), Reply(text="Edited answer.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "ed", MEMBER_PASSWORD)
        await send(page, "Hello")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Fine.")
        mine = page.locator(".msg.user")
        await expect(mine.first.get_by_role("button", name="Edit")).to_have_count(1)

        await send(page, "Tell me a long story")
        await expect(page.locator(".msg.assistant").last).to_have_class(re.compile(r"\bstreaming\b"))
        # While a turn runs nothing offers to edit (the server would refuse it: 409),
        # also on a page loaded mid-turn.
        await expect(mine.first.get_by_role("button", name="Edit")).to_have_count(0)
        await page.reload()
        await expect(page.locator(".msg.assistant").last).to_have_class(re.compile(r"\bstreaming\b"))
        await expect(page.get_by_role("button", name="Stop")).to_be_visible()
        await expect(mine.first.get_by_role("button", name="Edit")).to_have_count(0)
        await page.get_by_role("button", name="Stop").click()
        await expect(page.locator(".msg.assistant").last).not_to_have_class(re.compile(r"\bstreaming\b"))
        await expect(mine.first.get_by_role("button", name="Edit")).to_have_count(1)
        await expect(mine.last.get_by_role("button", name="Edit")).to_have_count(1)
        await mine.last.get_by_role("button", name="Edit").click()
        box = page.get_by_role("textbox", name="Edit your message")
        await box.fill("A short one")
        await page.get_by_role("button", name="Send edited").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Edited answer.")
        await expect(mine.last.locator(".bubble")).to_have_text("A short one")


async def test_an_unreachable_model_tells_a_member_what_they_can_do_and_an_admin_where_to_look(skald, browser_pages):
    """The provider's address is the admin's to fix: a member reads "try again later or
    tell an administrator", live and after a reload; the admin keeps the provider hint."""
    host = await skald.start()
    admin = await host.admin()
    provider = await admin.post("/api/admin/models/providers", json={"name": "Lokal", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-test"})
    assert provider.status_code == 201, provider.text
    entry = await admin.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": "gone", "priority": 1})
    assert entry.status_code == 201, entry.text
    await host.create_member("greta", locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "greta", MEMBER_PASSWORD)
    box = page.locator(".composer-input")
    await box.fill("Hallo?")
    await box.press("Enter")
    member_text = "Das Modell war nicht erreichbar. Versuch es bitte später noch einmal, oder sag einem Administrator Bescheid, wenn es so bleibt."
    failed = page.locator(".msg.assistant[data-status=error] .msg-body")
    await expect(failed).to_have_text(member_text)
    await page.reload()
    await expect(failed).to_have_text(member_text)

    admin_page = await browser_pages.new(host.url)
    await sign_in(admin_page, "admin", ADMIN_PASSWORD)
    await send(admin_page, "Anyone?")
    await expect(admin_page.locator(".msg.assistant[data-status=error] .msg-body")).to_have_text(
        "The model could not be reached. Is the provider's address right, and is it running?")


async def test_an_answer_without_words_offers_nothing_to_copy_or_read_aloud(skald, browser_pages):
    """A round of tool calls alone (no text) shows its cards, not "Kopieren" and "Vorlesen"
    for nothing; the answer after it, with words, has both. Live and after a reload."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[NotesPlugin()], enable=["notes"])
        await configure_model(await host.admin(), server)
        await host.create_member("tove", locale="de")
        server.script(MODEL, [
            Reply(text="", tool_calls=[ToolCall("write_note", {"path": "a.md", "text": "x"})]),
            Reply(text="Notiert."),
        ])
        page = await browser_pages.new(host.url)
        await sign_in(page, "tove", MEMBER_PASSWORD)
        box = page.locator(".composer-input")
        await box.fill("Schreib eine Notiz")
        await box.press("Enter")
        answers = page.locator(".msg.assistant")
        await page.get_by_role("button", name="Erlauben").click()  # asked first: settled after the answer
        await expect(answers.last.locator(".msg-body")).to_have_text("Notiert.")
        await expect(answers.last).to_have_attribute("data-status", "complete")
        for reload in (False, True):
            if reload:
                await page.reload()
                await expect(answers.last.locator(".msg-body")).to_have_text("Notiert.")
            tool_only = answers.filter(has=page.locator(".tool-list > *")).first
            await expect(tool_only).to_contain_text("write_note")
            await expect(tool_only.get_by_role("button", name="Kopieren")).to_have_count(0)
            await expect(tool_only.get_by_role("button", name="Vorlesen")).to_have_count(0)
            await expect(answers.last.get_by_role("button", name="Kopieren")).to_have_count(1)
            await expect(answers.last.get_by_role("button", name="Vorlesen")).to_have_count(1)


async def test_a_stopped_answer_names_its_model_live_as_after_a_reload(skald, browser_pages):
    """The turn's `cancelled` names no model: the live view showed "Stopped" alone, a
    reload "Stopped test-model"."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("una")
        server.script(MODEL, [Hang(text="slowly slowly slowly", token_delay=0.1)])
        page = await browser_pages.new(host.url)
        await sign_in(page, "una", MEMBER_PASSWORD)
        await send(page, "Tell me slowly")
        answer = page.locator(".msg.assistant")
        await expect(answer.locator(".msg-body")).to_contain_text("slowly")
        await page.get_by_role("button", name="Stop").click()
        for reload in (False, True):
            if reload:
                await page.reload()
            await expect(answer).to_have_attribute("data-status", "cancelled")
            await expect(answer.locator(".msg-meta .badge")).to_have_text("Stopped")
            await expect(answer.locator(".msg-meta .model")).to_have_text(MODEL)


async def test_an_answer_stopped_before_its_first_word_shows_live_as_after_a_reload(skald, browser_pages):
    """Its row is stored as a stopped answer with no words: the live view drew no bubble
    for it, a reload an empty "Stopped" one (no model line: it wrote nothing)."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("uwe")
        server.script(MODEL, [Hang()])
        page = await browser_pages.new(host.url)
        await sign_in(page, "uwe", MEMBER_PASSWORD)
        await send(page, "Think hard first")
        for _ in range(200):  # the request reached the model: the answer's row is written with it
            if server.requests_for(MODEL):
                break
            await asyncio.sleep(0.05)
        await page.get_by_role("button", name="Stop").click()
        answer = page.locator(".msg.assistant")
        for reload in (False, True):
            if reload:
                await page.reload()
            await expect(answer).to_have_count(1)
            await expect(answer).to_have_attribute("data-status", "cancelled")
            await expect(answer.locator(".msg-meta .badge")).to_have_text("Stopped")


async def test_an_answer_waiting_for_an_approval_offers_copy_and_read_aloud_only_once_finished(skald, browser_pages):
    """The words above an approval card are not the answer yet: no Copy or Read aloud
    while the card waits, live or after a reload; both once the turn has answered."""
    notes = NotesPlugin()
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[notes], enable=["notes"])
        await configure_model(await host.admin(), server)
        await host.create_member("vera")
        server.script(MODEL, [
            Reply(text="Let me write that down.", tool_calls=[ToolCall("write_note", {"path": "a.md", "text": "x"})]),
            Reply(text="Written."),
        ])
        page = await browser_pages.new(host.url)
        await sign_in(page, "vera", MEMBER_PASSWORD)
        await send(page, "Write a note")
        approval = page.get_by_role("group", name="Approval for write_note")
        round_ = page.locator(".msg.assistant").filter(has_text="Let me write that down.")
        for reload in (False, True):
            if reload:
                await page.reload()
            await expect(approval).to_be_visible()
            await expect(round_.locator(".msg-body")).to_have_text("Let me write that down.")
            await expect(round_.get_by_role("button", name="Copy")).to_have_count(0)
            await expect(round_.get_by_role("button", name="Read aloud")).to_have_count(0)
            # Its words are credited to their model live as after a reload.
            await expect(round_.locator(".msg-meta .model")).to_have_attribute("title", MODEL)
        await approval.get_by_role("button", name="Approve").click()
        final = page.locator(".msg.assistant").last
        await expect(final.locator(".msg-body")).to_have_text("Written.")
        for answer in (round_, final):
            await expect(answer.get_by_role("button", name="Copy")).to_have_count(1)
            await expect(answer.get_by_role("button", name="Read aloud")).to_have_count(1)
        assert len(notes.calls) == 1
