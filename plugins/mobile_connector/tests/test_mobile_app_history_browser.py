"""The open app shows the conversation as the web does (a probe that used a paired phone
beside the web found each gap): the member's message written elsewhere appears in place
before its answer, live and after the stream was away, and once; a file sent from the
phone stays named on its message after a reload; an approval reads "Approve"/"Approved."
as on the web, and a reload keeps the tool call with its outcome."""

from __future__ import annotations

import pytest

from skald_host.testing import Hang, Reply, ToolCall
from mobile_support import BASE, MODEL
from test_mobile_app_browser import PNG, _app, _send, _shown_messages


@pytest.fixture
def browser(plugin_browser):
    return plugin_browser.browser


async def _open_chat(page, setup, text: str, answer: str) -> str:
    """A new chat with one exchange, sent from the phone; its conversation's id."""
    await page.tap("text=New chat")
    await page.wait_for_selector("textarea[name=text]")
    setup.model.script(MODEL, [Reply(answer)])
    await _send(page, text)
    await page.wait_for_selector(f".message.assistant >> text={answer}")
    await page.wait_for_function("() => location.hash.startsWith('#chat/')")
    return await page.evaluate("decodeURIComponent(location.hash.slice(6))")


async def test_a_message_written_on_the_web_shows_in_place_once_live_and_after_the_stream_was_away(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        conversation = await _open_chat(page, setup, "hello from the phone", "Hello phone.")
        assert await _shown_messages(page) == ["hello from the phone", "Hello phone."]  # the phone's own, not doubled

        # Live: written on the web while the app is open.
        setup.model.script(MODEL, [Reply("Answer to the web.")])
        sent = await alice.post(f"/api/conversations/{conversation}/messages", json={"text": "Web live message XYZ"})
        assert sent.status_code == 202, sent.text
        await page.wait_for_selector(".message.assistant >> text=Answer to the web.")
        assert await _shown_messages(page) == ["hello from the phone", "Hello phone.", "Web live message XYZ", "Answer to the web."]

        # The phone's own next message is drawn once (its key names it), then a reload agrees.
        setup.model.script(MODEL, [Reply("Phone again.")])
        await _send(page, "second from the phone")
        await page.wait_for_selector(".message.assistant >> text=Phone again.")
        live = await _shown_messages(page)
        assert live == ["hello from the phone", "Hello phone.", "Web live message XYZ", "Answer to the web.", "second from the phone", "Phone again."]
        await page.reload()
        await page.wait_for_selector(".message.assistant >> text=Phone again.")
        assert await _shown_messages(page) == live

        # The stream away (a network blip the page never hears of, a server restart): the
        # web's message is stored meanwhile; the answer comes over the reopened stream, and
        # its question is there before it.
        await page.route("**/stream", lambda route: route.abort())
        alice_id = (await alice.get(f"{BASE}/me")).json()["member"]["id"]
        setup.service._fan_out(alice_id, {"kind": "closed"})  # the open stream ends
        await page.wait_for_selector("#banner >> text=Offline", timeout=15_000)
        setup.model.script(MODEL, [Reply("Late answer that streams on for a while.", token_delay=0.4)])
        sent = await alice.post(f"/api/conversations/{conversation}/messages", json={"text": "Written while away"})
        assert sent.status_code == 202, sent.text
        await page.unroute("**/stream")
        await page.wait_for_selector(".message.assistant:not(.streaming) >> text=streams on for a while", timeout=20_000)
        shown = await _shown_messages(page)
        assert shown[-2:] == ["Written while away", "Late answer that streams on for a while."], shown
        assert shown.count("Written while away") == 1


async def test_a_file_sent_from_the_phone_stays_named_on_its_message_after_a_reload(setup, browser, tmp_path):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await page.tap("text=New chat")
        await page.wait_for_selector("textarea[name=text]")
        photo = tmp_path / "holiday.png"
        photo.write_bytes(PNG)
        await page.set_input_files("input[type=file]", str(photo))
        await page.wait_for_selector("ul.attached >> text=holiday.png")
        setup.model.script(MODEL, [Reply("A fine photo.")])
        await _send(page, "look at this")
        await page.wait_for_selector("text=A fine photo.")
        await page.reload()
        await page.wait_for_selector("text=A fine photo.")
        bubble = page.locator(".message.user", has_text="look at this")
        assert await bubble.locator("ul.files li").all_inner_texts() == ["holiday.png"]


async def test_an_approval_reads_as_on_the_web_and_its_tool_call_stays_after_a_reload(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await page.tap("text=New chat")
        await page.wait_for_selector("textarea[name=text]")
        setup.model.script(MODEL, [Reply("Let me write that.", tool_calls=(ToolCall("write_note", {"text": "milk"}),)), Reply("Noted.")])
        await _send(page, "note milk")
        card = page.locator(".approval").first
        await card.locator("button:has-text('Approve')").wait_for()
        assert await card.locator("button").all_inner_texts() == ["Approve", "Deny"]  # the web's words
        await card.locator("button:has-text('Approve')").tap()
        await card.locator("text=Approved.").wait_for()
        await page.wait_for_selector("text=Noted.")

        await page.reload()
        await page.wait_for_selector("text=Noted.")
        call = page.locator(".tool-call")
        assert await call.count() == 1
        assert await call.locator("p").all_inner_texts() == ["write_note — Done", "Approved."]
        # In its place: after the words said before it ran, before the answer.
        order = await page.locator("#messages > *").evaluate_all("(nodes) => nodes.map((n) => n.innerText.split('\\n')[0].trim())")
        assert order == ["note milk", "Let me write that.", "write_note — Done", "Noted."]

        # German, as the web's German says it.
        await page.evaluate("localStorage.setItem('skald.mobile.locale', 'de')")
        await page.reload()
        await page.wait_for_selector(".tool-call >> text=Erlaubt.")
        assert await page.locator(".tool-call p").all_inner_texts() == ["write_note — Erledigt", "Erlaubt."]
        setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("write_note", {"text": "eggs"}),)), Hang("never")])
        await _send(page, "note eggs")
        waiting = page.locator(".approval:not(.tool-call)")
        await waiting.locator("button").first.wait_for()
        assert await waiting.locator("button").all_inner_texts() == ["Erlauben", "Ablehnen"]
        await page.get_by_role("button", name="Stopp", exact=True).tap()
        await waiting.locator("text=Nicht mehr gefragt").wait_for()
