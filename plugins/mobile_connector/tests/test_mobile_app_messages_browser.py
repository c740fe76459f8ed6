"""The app's messages in a phone-sized Chromium: one sent while the server cannot be
reached waits (with its photo) and goes when it can, one the server refuses comes back
to the composer, files go alone and show on their bubble, approval cards follow what
settled them elsewhere, the shared renderer and the host's stored words speak German,
and an unlinked phone keeps nothing of the member (a probe of the app found each)."""

from __future__ import annotations

import json

import pytest

from skald_host.core.agent.runtime import RESUMED_NOTE
from skald_host.core.agent.store import reason_json
from skald_host.testing import Hang, Reply, ToolCall
from mobile_support import BASE, MODEL
from test_mobile_app_browser import PHONE, PNG, _app, _send

SENDS = f"**{BASE}/conversations/*/messages"
# Every button at least 44 px, and nothing wider than the phone's screen.
TARGETS_AND_WIDTH = """() => ({
  small: [...document.querySelectorAll("button")].filter((b) => b.offsetParent && (b.offsetWidth < 44 || b.offsetHeight < 44))
    .map((b) => b.getAttribute("aria-label") || b.textContent),
  width: document.documentElement.scrollWidth,
})"""


@pytest.fixture
def browser(plugin_browser):
    return plugin_browser.browser


async def _new_chat(page) -> None:
    """A new chat: a draft on the phone until its first message is sent."""
    await page.tap("text=New chat")
    await page.wait_for_selector("textarea[name=text]")


async def _conversation(page) -> str:
    """The open chat's conversation, made by its first message (the address names it from then)."""
    await page.wait_for_function("() => location.hash.startsWith('#chat/')")
    return await page.evaluate("decodeURIComponent(location.hash.slice(6))")


async def _user_messages(member, conversation: str) -> list[str]:
    messages = (await member.get(f"{BASE}/conversations/{conversation}")).json()["messages"]
    return [m["content"] for m in messages if m["role"] == "user"]


def _with_photo(request) -> bool:
    """Whether the model's request carries the photo with the member's last message."""
    last = next(m for m in reversed(request.messages) if m.get("role") == "user")
    return "The member attached these files" in str(last) and "photo" in str(last)


async def _photo(page, tmp_path) -> None:
    photo = tmp_path / "photo.png"
    photo.write_bytes(PNG)
    await page.set_input_files("input[type=file]", str(photo))
    await page.wait_for_selector("ul.attached >> text=photo.png")


async def test_a_message_sent_while_the_server_is_away_waits_with_its_photo_and_goes_when_it_is_back(setup, browser, tmp_path):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await _new_chat(page)
        await _photo(page, tmp_path)
        await page.route(SENDS, lambda route: route.abort("internetdisconnected"))
        await page.fill("textarea[name=text]", "canary-7f3 look at this")
        await page.tap("button:has-text('Send')")
        waiting = page.locator(".message.user.waiting", has_text="canary-7f3 look at this")
        await waiting.wait_for()
        conversation = await _conversation(page)
        assert "Waiting to send" in await waiting.inner_text() and "photo.png" in await waiting.inner_text()
        await page.wait_for_selector("#banner >> text=Offline")
        # Not shown as running, and Send waits while the server cannot be reached.
        assert await page.locator(".typing").is_hidden() and await page.locator("button:has-text('Stop')").is_hidden()
        assert await page.locator("button:has-text('Send')").is_disabled()
        # A reload keeps it, waiting.
        await page.reload()
        await page.locator(".message.user.waiting", has_text="canary-7f3 look at this").wait_for()
        assert await _user_messages(alice, conversation) == []

        setup.model.script(MODEL, [Reply("What a photo.")])
        await page.unroute(SENDS)
        await page.wait_for_selector(".message.assistant >> text=What a photo.", timeout=30_000)
        assert await page.locator(".message.user.waiting").count() == 0
        assert await page.locator("button:has-text('Send')").is_enabled()
        assert await _user_messages(alice, conversation) == ["canary-7f3 look at this"]  # once
        assert _with_photo(setup.model.requests[-1])  # the photo went with it
        assert await page.evaluate("localStorage.getItem('skald.mobile.outbox')") is None


async def test_a_message_the_server_refuses_goes_back_to_the_composer_with_its_photo(setup, browser, tmp_path):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await _new_chat(page)
        await _photo(page, tmp_path)
        refusal = json.dumps({"error": "this conversation is closed", "code": "refused"})
        await page.route(SENDS, lambda route: route.fulfill(status=400, content_type="application/json", body=refusal))
        await page.fill("textarea[name=text]", "canary-2b1 keep me")
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".toast >> text=Not sent: this conversation is closed")
        conversation = await _conversation(page)
        assert await page.locator(".message.user").count() == 0
        assert await page.input_value("textarea[name=text]") == "canary-2b1 keep me"
        assert await page.locator("ul.attached >> text=photo.png").count() == 1
        assert await page.evaluate("localStorage.getItem('skald.mobile.outbox')") is None

        # Sent again once the server takes it: words and photo.
        await page.unroute(SENDS)
        setup.model.script(MODEL, [Reply("Kept.")])
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".message.assistant >> text=Kept.")
        assert await _user_messages(alice, conversation) == ["canary-2b1 keep me"]
        assert _with_photo(setup.model.requests[-1])


async def test_the_composer_waits_while_offline_and_works_again_when_back(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await _new_chat(page)
        send = page.locator("button:has-text('Send')")
        await context.set_offline(True)
        await page.wait_for_selector("#banner >> text=Offline", timeout=15_000)
        assert await send.is_disabled()
        await context.set_offline(False)
        await page.wait_for_selector("#banner", state="hidden", timeout=15_000)
        await page.wait_for_function("() => !document.querySelector('form.composer button[type=submit]').disabled")
        assert await page.locator("form.composer").is_visible()


async def test_files_go_without_words_show_on_their_bubble_and_can_be_taken_off_before(setup, browser, tmp_path):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await _new_chat(page)
        # Chosen, then taken off: the message goes without it.
        await _photo(page, tmp_path)
        remove = page.get_by_role("button", name="Remove photo.png", exact=True)
        assert await page.evaluate(TARGETS_AND_WIDTH) == {"small": [], "width": PHONE["width"]}
        await remove.tap()
        assert await page.locator("ul.attached").is_hidden()
        setup.model.script(MODEL, [Reply("No photo here.")])
        await _send(page, "just words")
        await page.wait_for_selector("text=No photo here.")
        conversation = await _conversation(page)
        assert not _with_photo(setup.model.requests[-1])

        # A photo alone, no words: sent with the web's placeholder, its name on the bubble.
        await _photo(page, tmp_path)
        setup.model.script(MODEL, [Reply("A photo without words.")])
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector("text=A photo without words.")
        assert _with_photo(setup.model.requests[-1])
        bubble = page.locator(".message.user", has_text="(attached files)")
        assert "photo.png" in await bubble.inner_text()
        assert await _user_messages(alice, conversation) == ["just words", "(attached files)"]


async def test_approval_cards_follow_a_decision_on_the_web_and_a_stop(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await _new_chat(page)
        setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("write_note", {"text": "milk"}),)), Reply("Noted.")])
        await _send(page, "note milk")
        await page.locator(".approval button:has-text('Approve')").wait_for()
        conversation = await _conversation(page)
        assert (await alice.patch(f"/api/conversations/{conversation}", json={"title": "Shopping list"})).status_code == 200
        await page.reload()
        await page.wait_for_selector("#title >> text=Shopping list")  # not "Skald"

        card = page.locator(".approval").first
        await card.locator("button:has-text('Approve')").wait_for()
        # The arguments as the member reads them, not raw JSON.
        assert await card.locator(".arguments dt").all_inner_texts() == ["text"]
        assert await card.locator(".arguments dd").all_inner_texts() == ["milk"]
        assert await page.evaluate(TARGETS_AND_WIDTH) == {"small": [], "width": PHONE["width"]}
        approval_id = await card.get_attribute("data-approval")
        answer = await alice.post(f"/api/approvals/{approval_id}", json={"decision": "approve"})
        assert answer.status_code == 200, answer.text
        await card.locator("text=Approved.").wait_for()
        assert await card.locator("button").count() == 0
        await page.wait_for_selector("text=Noted.")

        # Stopped while a card waits: it no longer offers Approve.
        setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("write_note", {"text": "eggs"}),)), Hang("never")])
        await _send(page, "note eggs")
        second = page.locator(".approval").nth(1)
        await second.locator("button:has-text('Approve')").wait_for()
        await page.get_by_role("button", name="Stop", exact=True).tap()
        await second.locator("text=No longer asked: the conversation was stopped.").wait_for()
        assert await second.locator("button").count() == 0
        assert setup.probe.notes == ["milk"]


async def test_the_app_says_the_renderers_and_the_hosts_words_in_german(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await _new_chat(page)
        await page.evaluate("localStorage.setItem('skald.mobile.locale', 'de')")
        await page.reload()
        await page.wait_for_selector("textarea[placeholder='Nachricht schreiben']")

        # A code block and an image: the shared renderer's labels, not its keys.
        setup.model.script(MODEL, [Reply("Hier:\n\n```python\nprint(1)\n```\n\n![eine Katze](https://example.org/cat.png)")])
        await _send(page, "zeig es")
        conversation = await _conversation(page)
        answer = page.locator(".message.assistant", has_text="print(1)")
        await answer.wait_for()
        await answer.locator(".copy-code").tap()
        shown = await answer.evaluate("(n) => n.innerText + ' ' + [...n.querySelectorAll('[title],[aria-label]')].map((e) => (e.title || '') + ' ' + (e.getAttribute('aria-label') || '')).join(' ')")
        assert "chat." not in shown, shown
        assert "Bild: eine Katze" in shown, shown

        # A Stop leaves a queued message unanswered: said in German, with no Retry the phone lacks.
        setup.model.script(MODEL, [Hang("denke nach"), Reply("Jetzt beantwortet.")])
        await _send(page, "denk nach")
        await page.wait_for_selector(".message.assistant.streaming >> text=denke nach")
        await _send(page, "canary-5d9 und das")
        await page.get_by_role("button", name="Stopp", exact=True).tap()
        unanswered = page.locator(".message.assistant", has_text="Nicht beantwortet: das Gespräch wurde gestoppt.")
        await unanswered.wait_for()
        for _ in (1, 2):  # live, then after a reload
            text = await page.locator("#messages").inner_text()
            assert "Not answered" not in text and "Retry" not in text and "Erneut" not in text, text
            await page.reload()
            await unanswered.wait_for()
        # "Send again" sends its words as a new message.
        await unanswered.get_by_role("button", name="Noch einmal senden", exact=True).tap()
        await page.wait_for_selector(".message.assistant >> text=Jetzt beantwortet.")
        assert (await _user_messages(alice, conversation))[-2:] == ["canary-5d9 und das", "canary-5d9 und das"]

        # The note recovery writes where an answer was cut off.
        runtime = setup.host.core.chat.live_runtime(alice.member["id"])
        frame = await runtime.store.root_frame(conversation)
        await runtime.store.add_note(frame, RESUMED_NOTE, reason=reason_json("answer_resumed"))
        await page.reload()
        await page.wait_for_selector(".message.note >> text=Eine Antwort hier wurde unterbrochen")
        assert "cut off" not in await page.locator("#messages").inner_text()


async def test_an_unlinked_phone_keeps_nothing_of_the_member(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await _new_chat(page)
        setup.model.script(MODEL, [Reply("canary-c41 secret answer")])
        await _send(page, "canary-c41 secret question")
        await page.wait_for_selector("text=canary-c41 secret answer")
        await page.goto(f"{BASE}/app/#list")
        await page.wait_for_selector("#conversations a")
        # Something waiting to be sent, and a refused one kept for its chat.
        await page.evaluate("""() => {
          localStorage.setItem('skald.mobile.outbox', JSON.stringify([{key: 'm-x', conversation_id: 'c', typed: 'canary-c41 waiting', text: 'canary-c41 waiting', attachments: []}]));
          localStorage.setItem('skald.mobile.drafts', JSON.stringify({c: {typed: 'canary-c41 draft', attachments: []}}));
        }""")
        assert "canary-c41" in await page.evaluate("localStorage.getItem('skald.mobile.cache')")
        device_id = (await alice.get(f"{BASE}/devices")).json()["devices"][0]["id"]
        assert (await alice.delete(f"{BASE}/devices/{device_id}")).status_code == 200
        await page.wait_for_selector("text=This phone is no longer paired", timeout=20_000)
        left = await page.evaluate("JSON.stringify(Object.fromEntries(Object.entries(localStorage)))")
        assert "canary-c41" not in left and "skald.mobile.token" not in left, left


async def _cached_copies(page) -> dict:
    return await page.evaluate("JSON.parse(localStorage.getItem('skald.mobile.cache') || '{}').messages || {}")


async def test_a_conversation_deleted_on_the_web_leaves_the_phone_too(setup, browser):
    """Probe 7, finding 1: the phone kept its copy of a deleted conversation (offline it
    still opened), and the open chat refused each message with "no such conversation".
    Now the list drops copies it no longer names, and the open chat says it was deleted
    and goes back to the list, its unsent words waiting in a new chat."""
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        setup.model.script(MODEL, [Reply("First answer.")])
        await _new_chat(page)
        await page.fill("textarea[name=text]", "canary-d31 listed then deleted")
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".message.assistant >> text=First answer.")
        listed = await _conversation(page)
        await page.evaluate("location.hash = '#list'")
        await page.wait_for_selector("#conversations a")
        await page.wait_for_function(f"() => JSON.parse(localStorage.getItem('skald.mobile.cache')).messages?.[{json.dumps(listed)}]")

        # Deleted on the web while the phone is on its list: the list drawn again drops the copy.
        assert (await alice.delete(f"/api/conversations/{listed}")).status_code == 200
        await page.evaluate("location.hash = '#projects'")
        await page.evaluate("location.hash = '#list'")
        await page.wait_for_selector("#conversations li")
        await page.wait_for_function(f"() => !JSON.parse(localStorage.getItem('skald.mobile.cache')).messages?.[{json.dumps(listed)}]")
        assert "canary-d31" not in json.dumps(await _cached_copies(page))

        # Deleted while open: the next message is not refused beside a working composer.
        setup.model.script(MODEL, [Reply("Second answer.")])
        await _new_chat(page)
        await page.fill("textarea[name=text]", "canary-d32 open then deleted")
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".message.assistant >> text=Second answer.")
        open_one = await _conversation(page)
        assert (await alice.delete(f"/api/conversations/{open_one}")).status_code == 200
        await page.fill("textarea[name=text]", "canary-d33 after the deletion")
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".toast >> text=Not sent: this conversation was deleted")
        await page.wait_for_function("() => location.hash === '#list'")
        assert "canary-d32" not in json.dumps(await _cached_copies(page))
        await _new_chat(page)
        assert await page.input_value("textarea[name=text]") == "canary-d33 after the deletion"

        # Opened again by its address: said deleted, back to the list.
        await page.evaluate(f"location.hash = '#chat/' + encodeURIComponent({json.dumps(open_one)})")
        await page.wait_for_selector(".toast >> text=This conversation was deleted")
        await page.wait_for_function("() => location.hash === '#list'")
        assert await page.locator("text=no such conversation").count() == 0
