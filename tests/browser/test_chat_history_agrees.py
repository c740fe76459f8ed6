"""What the chat says live is what it says after a reload: an approval whose access was
withdrawn, a model fallback and the failed answer after it, the status line; and the
composer's habits: Enter sends an edit, a draft outlives the session in its tab."""

from __future__ import annotations

import socket

from playwright.async_api import expect

from skald_host.testing import Hang, Reply, ScriptedError, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, NotesPlugin, configure_model, send

STATUS_LINE = ".conv-main > p.turn-status"
#: The colour of failures, as computed.
DANGER = "() => { const p = document.createElement('p'); p.style.color = 'var(--danger)'; document.body.append(p); const c = getComputedStyle(p).color; p.remove(); return c; }"


async def test_an_approval_whose_access_was_withdrawn_says_why_live_and_after_a_reload(skald, browser_pages):
    notes = NotesPlugin()
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[notes], enable=["notes"])
        admin = await host.admin()
        await configure_model(admin, server)
        await host.create_member("dora")
        server.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"path": "notes/a.txt", "text": "a"})]), Reply(text="It did not run.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "dora", MEMBER_PASSWORD)
        await send(page, "Write a note")
        approval = page.get_by_role("group", name="Approval for write_note")
        await expect(approval).to_be_visible()
        # Waiting for the member is said, live and after a reload alike.
        await expect(page.locator(STATUS_LINE)).to_have_text("The assistant waits for your approval.")
        await page.reload()
        await expect(page.locator(STATUS_LINE)).to_have_text("The assistant waits for your approval.")

        assert (await admin.put("/api/admin/plugins/notes/enabled", json={"enabled": False})).status_code == 200
        await page.get_by_role("group", name="Approval for write_note").get_by_role("button", name="Approve").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("It did not run.")
        said = "Approved, but your access to this tool was withdrawn: it did not run."
        for reload in (False, True):
            if reload:
                await page.reload()
                await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("It did not run.")
            card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="write_note"))
            await expect(card.locator(".badge")).to_have_text("Denied")
            await expect(card.locator(".approval-status")).to_have_text(said)
            await expect(card.locator(".approval-status")).to_have_class("approval-status denied")
        assert notes.calls == []


async def test_a_fallback_and_the_failed_answer_after_it_read_the_same_after_a_reload(skald, browser_pages):
    with socket.socket() as probe:  # a port nothing listens on: that model cannot be reached
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with ScriptedModelServer(models=("backup",)) as server:
        host = await skald.start()
        api = await host.admin()
        gone = (await api.post("/api/admin/models/providers", json={"name": "Gone", "base_url": f"http://127.0.0.1:{port}/v1"})).json()
        scripted = (await api.post("/api/admin/models/providers", json={"name": "Scripted", "base_url": server.base_url})).json()
        for provider, name, label, priority in ((gone, "gone", "Gone model", 1), (scripted, "backup", "Backup", 2)):
            body = {"provider_id": provider["id"], "model": name, "label": label, "priority": priority}
            assert (await api.post("/api/admin/models/entries", json=body)).status_code == 201
        await host.create_member("erin")
        server.script("backup", [ScriptedError(500)])
        page = await browser_pages.new(host.url)
        await sign_in(page, "erin", MEMBER_PASSWORD)
        await send(page, "Who answers?")
        failed = page.locator(".msg.assistant").last
        await expect(failed).to_have_attribute("data-status", "error")
        for reload in (False, True):
            if reload:
                await page.reload()
                await expect(failed).to_have_attribute("data-status", "error")
            # The note, then the answer it led to; the answer names the model that failed.
            await expect(page.locator(".msg:not(.user)")).to_have_count(2)
            await expect(page.locator(".msg:not(.user)").first).to_have_text("Gone model did not answer; trying Backup.")
            await expect(failed.locator(".msg-meta .badge")).to_have_text("Failed")
            # A failed answer names the provider too: two entries may share a label (newcomer walk 4).
            await expect(failed.locator(".msg-meta .model")).to_have_text("Backup · Scripted")
            # Its text is why it failed, not an answer: nothing to copy (Retry is offered).
            await expect(failed.get_by_role("button", name="Retry")).to_be_visible()
            await expect(failed.get_by_role("button", name="Copy the answer")).to_have_count(0)
            await expect(page.locator(STATUS_LINE)).to_have_text("The answer failed.")


async def test_an_answer_of_the_second_of_two_providers_serving_one_model_name_is_labelled_by_its_entry(skald, browser_pages):
    """Both providers serve "shared"; A cannot be reached and B answers: the answer says
    B's label, live and after a reload (not the first entry of that model name)."""
    with socket.socket() as probe:  # a port nothing listens on: A cannot be reached
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with ScriptedModelServer(models=("shared",)) as server:
        host = await skald.start()
        api = await host.admin()
        down = (await api.post("/api/admin/models/providers", json={"name": "Down", "base_url": f"http://127.0.0.1:{port}/v1"})).json()
        up = (await api.post("/api/admin/models/providers", json={"name": "Up", "base_url": server.base_url})).json()
        for provider, label, priority in ((down, "Modell A", 10), (up, "Modell B", 20)):
            body = {"provider_id": provider["id"], "model": "shared", "label": label, "priority": priority}
            assert (await api.post("/api/admin/models/entries", json=body)).status_code == 201
        await host.create_member("gina")
        server.script("shared", [Reply(text="B answers.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "gina", MEMBER_PASSWORD)
        await send(page, "Who answers?")
        answer = page.locator(".msg.assistant").last
        await expect(answer.locator(".msg-body")).to_have_text("B answers.")
        for reload in (False, True):
            if reload:
                await page.reload()
                await expect(answer.locator(".msg-body")).to_have_text("B answers.")
            await expect(page.locator(".msg.note").first).to_have_text("Modell A did not answer; trying Modell B.")
            await expect(answer.locator(".msg-meta .model")).to_have_text("Modell B")


async def test_enter_sends_an_edited_message_and_shift_enter_starts_a_new_line(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("finn")
        server.script(MODEL, [Reply(text="First answer."), Reply(text="Edited answer.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "finn", MEMBER_PASSWORD)
        await send(page, "Hello")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("First answer.")
        await expect(page.locator(STATUS_LINE)).to_have_text("The assistant is done.")

        mine = page.locator(".msg.user")
        await mine.get_by_role("button", name="Edit").click()
        box = page.get_by_role("textbox", name="Edit your message")
        await box.press("Escape")  # still cancels
        await expect(box).to_have_count(0)
        await mine.get_by_role("button", name="Edit").click()
        await box.fill("Hello")
        await box.press("Shift+Enter")
        await box.type("again")
        await expect(box).to_have_value("Hello\nagain")
        await box.press("Enter")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Edited answer.")
        await expect(page.locator(".msg.user .bubble")).to_have_text("Hello\nagain")
        assert server.requests_for(MODEL)[-1].messages[-1]["content"] == "Hello\nagain"


#: Counts, from now on, the most answers the transcript showed at once.
COUNT_ANSWERS = """() => { window.mostAnswers = 0; const list = document.querySelector('.transcript');
  new MutationObserver(() => { window.mostAnswers = Math.max(window.mostAnswers, list.querySelectorAll('.msg.assistant').length); })
    .observe(list, { childList: true, subtree: true }); }"""


async def test_an_edit_never_shows_its_new_answer_under_the_old_one(skald, browser_pages):
    """On a slow device the new answer's first words can arrive before the edit's own
    reply is read: they showed under the old answer until then (seen as a flaky test
    in CI). The old answers go before the request. The browser's CPU is slowed through
    the DevTools protocol to stand in for that device."""
    edited = "Edited answer, a few words longer, so that it streams for a while."
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("finn")
        page = await browser_pages.new(host.url)
        await sign_in(page, "finn", MEMBER_PASSWORD)
        for attempt in range(3):  # the race is likelier with each, not certain in one
            server.script(MODEL, [Reply(text="First answer."), Reply(text=edited, token_delay=0.02)])
            await page.get_by_role("button", name="New conversation").click()
            # Typed only into the fresh composer: text typed while it replaced the old page
            # went to neither, and nothing was sent.
            await expect(page.get_by_role("heading", name="Hello, finn")).to_be_visible()
            await send(page, f"Hello {attempt}")
            await expect(page.locator(".msg.assistant .msg-body")).to_have_text("First answer.")
            cdp = await page.context.new_cdp_session(page)
            await cdp.send("Emulation.setCPUThrottlingRate", {"rate": 8})
            await page.locator(".msg.user").get_by_role("button", name="Edit").click()
            await page.get_by_role("textbox", name="Edit your message").fill(f"Hello again {attempt}")
            await page.evaluate(COUNT_ANSWERS)
            await page.get_by_role("textbox", name="Edit your message").press("Enter")
            # With the browser's CPU slowed eightfold on a loaded machine the new answer can
            # take longer than the default 5 s to show; only how many show at once is tested.
            await expect(page.locator(".msg.assistant")).to_have_count(1, timeout=20_000)
            await expect(page.locator(".msg.assistant .msg-body")).to_have_text(edited, timeout=20_000)
            await cdp.send("Emulation.setCPUThrottlingRate", {"rate": 1})
            assert await page.evaluate("window.mostAnswers") == 1


async def test_a_refused_edit_puts_back_the_answers_it_took_and_says_why(skald, browser_pages):
    """The answers after an edited message leave the screen before the edit is sent;
    when the server refuses it (here: a turn that another client of the member
    started meanwhile), they come back, and the form keeps the text with the reason."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        other_client = await host.member("finn")
        server.script(MODEL, [Reply(text="First answer."), Hang(text="Still thinking")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "finn", MEMBER_PASSWORD)
        await send(page, "Hello")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("First answer.")
        conversation_id = page.url.rsplit("/", 1)[-1]
        await page.locator(".msg.user").get_by_role("button", name="Edit").click()
        box = page.get_by_role("textbox", name="Edit your message")
        await box.fill("Hello, edited")

        sent = await other_client.post(f"/api/conversations/{conversation_id}/messages", json={"text": "Meanwhile"})
        assert sent.status_code == 202, sent.text
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Still thinking")
        await box.press("Enter")
        await expect(page.locator(".edit-form [role='status']")).to_have_text("An answer is still being written in this conversation.")
        await expect(box).to_have_value("Hello, edited")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text(["First answer.", "Still thinking"])
        await expect(page.locator(".msg.user .bubble")).to_have_text(["Meanwhile"])  # the first is the form
        assert (await other_client.post(f"/api/conversations/{conversation_id}/stop")).status_code == 200
        await expect(page.locator(".msg.assistant")).to_have_count(2)
        assert len(server.requests_for(MODEL)) == 2  # the edit asked for nothing


async def session_ends_then_signs_in(page, admin, member_id: str, username: str) -> None:
    """The member's session ends (as when the server restarts) and ``username`` signs
    in on this very page, without a reload (``sign_in`` opens the start page first)."""
    assert (await admin.post(f"/api/admin/members/{member_id}/end-sessions")).status_code == 200
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.get_by_label("User name").fill(username)
    await page.get_by_label("Password", exact=True).fill(MEMBER_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()


async def test_an_unsent_draft_survives_the_session_in_this_tab_and_goes_when_sent_or_at_sign_out(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_model(admin, server)
        await host.create_member("gina")
        server.script(MODEL, [Reply(text="Noted.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "gina", MEMBER_PASSWORD)
        await send(page, "Start")
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Noted.")
        composer = page.get_by_role("textbox", name="Message")
        await composer.fill("half a thought")

        # The session ends (as when the server restarts); signing in again on this page.
        gina = await host.core.users.find("gina")
        await session_ends_then_signs_in(page, admin, gina.id, "gina")
        await expect(composer).to_have_value("half a thought")
        assert await page.evaluate("Object.keys(localStorage).filter((k) => k.includes('draft')).length") == 0

        # Sent: gone from the tab's storage; typed again, then signed out: gone too.
        server.script(MODEL, [Reply(text="Got it.")])
        await composer.press("Enter")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Got it.")
        await page.reload()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Got it.")
        await expect(composer).to_have_value("")
        await composer.fill("a secret")
        await page.reload()
        await expect(composer).to_have_value("a secret")
        await page.get_by_role("button", name="Sign out").click()
        await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        assert await page.evaluate("Object.keys(sessionStorage).filter((k) => k.includes('draft')).length") == 0

        # A session that ends on its own keeps the draft, but another member signing in on
        # this tab does not find it in its storage.
        await host.create_member("hugo")
        await sign_in(page, "gina", MEMBER_PASSWORD)
        await composer.fill("gina's own words")
        await page.reload()
        await expect(composer).to_have_value("gina's own words")
        await session_ends_then_signs_in(page, admin, gina.id, "hugo")
        await expect(composer).to_have_value("")
        assert await page.evaluate("Object.values(sessionStorage).filter((v) => v.includes('own words')).length") == 0


async def test_a_message_a_stop_left_unanswered_reads_as_stopped_not_failed_live_and_after_a_reload(skald, browser_pages):
    """Stop while a second message waited for the first answer: it was marked "Failed" in
    red and the status line said "The answer failed." Nothing failed; the member stopped
    it. It reads as not answered, with Retry to have it answered."""
    from skald_host.testing import Hang

    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("gus")
        server.script(MODEL, [Hang(text="I am thinking very slowly about this question", token_delay=0.1), Reply(text="Both answered.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "gus", MEMBER_PASSWORD)
        await send(page, "Take your time")
        await expect(page.locator(".msg.assistant .msg-body")).to_contain_text("I am thinking")
        await send(page, "And another thing")
        await expect(page.get_by_text("Queued: it is answered after the current answer.")).to_be_visible()
        await page.get_by_role("button", name="Stop").click()
        unanswered = page.locator(".msg.assistant").last
        for reload in (False, True):
            if reload:
                await page.reload()
            await expect(unanswered).to_have_attribute("data-status", "unanswered")
            await expect(unanswered.locator(".msg-body")).to_have_text(
                "Not answered: the conversation was stopped. Retry to have these messages answered.")
            await expect(unanswered.locator(".msg-meta .badge")).to_have_text("Not answered")
            assert await unanswered.evaluate("n => getComputedStyle(n).borderLeftColor") != await page.evaluate(DANGER), "drawn as a failure"
            await expect(page.locator(STATUS_LINE)).to_have_text("The conversation was stopped.")
            await expect(page.locator(".msg.assistant[data-status=error]")).to_have_count(0)
            await expect(unanswered.get_by_role("button", name="Retry")).to_be_visible()
        await unanswered.get_by_role("button", name="Retry").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Both answered.")
        await expect(page.locator(STATUS_LINE)).to_have_text("The assistant is done.")


async def test_an_answer_read_mid_stream_misses_no_word_after_a_reload_or_on_a_second_device(skald, browser_pages):
    """A newcomer's probe: a page reloaded mid-answer, or a second device opening the
    conversation mid-answer, started from the server's last checkpoint of the text
    (written at most every 0.5 s) and went on with the tokens sent after its socket
    listened: the words between were missing until `done` ("... w10, w13 ..."). This
    answer never ends (Hang): what the pages show once every token was sent is what
    they streamed, with no `done` to mend it."""
    words = [f"w{n}" for n in range(1, 161)]
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("hana")
        server.script(MODEL, [Hang(text=" ".join(words), token_delay=0.05)])
        page = await browser_pages.new(host.url)
        await sign_in(page, "hana", MEMBER_PASSWORD)
        await send(page, "Count slowly")
        await page.wait_for_url("**/#chat/*")
        streaming = ".msg.assistant.streaming .msg-body"
        await page.wait_for_function(f"() => (document.querySelector({streaming!r})?.textContent || '').includes('w5 ')", polling=20)
        await page.reload()
        # A second device opens the conversation while the answer streams on.
        other = await browser_pages.new(host.url)
        await sign_in(other, "hana", MEMBER_PASSWORD)
        await other.goto(page.url)
        for shown in (page, other):
            # Every word, in order, none twice: once the last one is on screen, all are.
            await shown.wait_for_function(f"() => (document.querySelector({streaming!r})?.textContent || '').includes('w160')", polling=50, timeout=60_000)
            text = await shown.locator(streaming).text_content()
            assert text.split() == words, f"words missing or repeated: {[w for w in words if w not in text.split()][:10]}"
