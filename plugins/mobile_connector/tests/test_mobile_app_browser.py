"""The installed app end to end in a phone-sized, touch-enabled Chromium (Playwright):
pair by code, chat with a streamed answer, approve, upload, stop, browse a project and
view its files, go offline and see the cached shell read-only, come back and see the notification that waited, unlink and be
refused. Every page is watched for uncaught errors, dialogs and CSP violations."""

from __future__ import annotations

import asyncio
import contextlib
import shutil

import pytest

from skald_host.testing import Hang, Reply, ToolCall
from mobile_support import BASE, MODEL, PLUGIN, pairing_code, project_with_a_file

PHONE = {"width": 390, "height": 844}
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4f50000000049454e44ae426082"
)



@pytest.fixture
def browser(plugin_browser):
    """Chromium from the host's test kit (skipped where it is missing)."""
    return plugin_browser.browser


async def test_the_phone_app_pairs_chats_approves_stops_works_offline_and_is_refused_after_unlink(setup, browser, tmp_path):
    alice = await setup.host.member("alice", display_name="Alice")
    await setup.host.allow_tool("ring")
    context = await browser.new_context(
        base_url=setup.host.url, viewport=PHONE, is_mobile=True, has_touch=True, locale="en-US", service_workers="allow"
    )
    problems: list[str] = []
    page = await context.new_page()
    page.set_default_timeout(10_000)
    page.on("pageerror", lambda error: problems.append(f"error: {error}"))
    page.on("dialog", lambda dialog: problems.append(f"dialog: {dialog.message}"))
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text or "Refused to" in m.text else None)
    try:
        # Pair by code, typed on the phone.
        await page.goto(f"{BASE}/app/")
        code = await pairing_code(alice)
        await page.fill("input[name=code]", code)
        await page.fill("input[name=name]", "Test phone")
        await page.tap("button[type=submit]")
        await page.wait_for_selector("text=New chat")
        devices = (await alice.get(f"{BASE}/devices")).json()["devices"]
        assert [d["name"] for d in devices] == ["Test phone"]
        # The phone is the home once paired (before, it reaches nobody and is refused).
        assert (await alice.put("/api/me/home-source", json={"home_source": PLUGIN})).status_code == 200

        # Chat with a streamed answer.
        setup.model.script(MODEL, [Reply("First words of a long streamed answer that keeps coming for a while.", token_delay=0.15)])
        await page.tap("text=New chat")
        await page.wait_for_selector("textarea[name=text]")
        await page.fill("textarea[name=text]", "hello phone")
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".message.assistant.streaming")  # a partial arrived before the end
        await page.wait_for_selector(".message.assistant:not(.streaming) >> text=keeps coming for a while")

        # Approve a tool call from the card.
        setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("write_note", {"text": "milk"}),)), Reply("Noted on your list.")])
        await page.fill("textarea[name=text]", "note milk")
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".approval >> text=write_note")
        await page.tap(".approval button:has-text('Approve')")
        await page.wait_for_selector("text=Noted on your list.")
        assert setup.probe.notes == ["milk"]

        # Attach a photo from the phone.
        setup.model.script(MODEL, [Reply("What a photo.")])
        photo = tmp_path / "photo.png"
        photo.write_bytes(PNG)
        await page.set_input_files("input[type=file]", str(photo))
        await page.wait_for_selector("text=photo.png")
        await page.fill("textarea[name=text]", "look at this")
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector("text=What a photo.")
        request = setup.model.requests[-1]
        assert "image" in str(request.body) or "photo" in str(request.body)

        # Stop a turn that hangs.
        setup.model.script(MODEL, [Hang("thinking very hard")])
        await page.fill("textarea[name=text]", "think")
        await page.tap("button:has-text('Send')")
        stop = page.locator("button:has-text('Stop')")
        await stop.wait_for(state="visible")
        await stop.tap()
        await stop.wait_for(state="hidden")

        # The member's projects, read-only, and the file viewer (Markdown and an image).
        project_id = await project_with_a_file(alice)
        stored = await alice.post(f"/api/projects/{project_id}/files/upload/plans/bed.png", content=PNG)
        assert stored.status_code in (200, 201), stored.text
        await page.goto(f"{BASE}/app/#list")
        await page.tap("button:has-text('Projects')")
        await page.tap("#projects >> text=Garden")
        await page.tap("#entries >> text=plans/")
        await page.tap("#entries >> text=beds.md")
        await page.wait_for_selector("#viewer :is(h1, h2, h3, h4) >> text=Beds")  # rendered as Markdown, not shown raw
        await page.wait_for_selector("#viewer >> text=Tomatoes left.")
        await page.tap("#back")
        await page.tap("#entries >> text=bed.png")
        image = page.locator("#viewer img")
        await image.wait_for()
        assert await image.evaluate("(img) => img.complete && img.naturalWidth === 1")

        # Offline: the cached shell shows the last conversations, read-only.
        await page.evaluate("navigator.serviceWorker.ready.then(() => true)")
        assert await page.evaluate("caches.keys().then((keys) => keys.length)") >= 1
        await page.goto(f"{BASE}/app/#list")
        await page.wait_for_selector("#conversations a")
        await context.set_offline(True)
        await page.reload()
        await page.wait_for_selector("#banner >> text=Offline")
        await page.wait_for_selector("#conversations a")
        await page.tap("#conversations a")
        await page.wait_for_selector("text=Noted on your list.")
        assert await page.locator("form.composer").is_hidden()

        # A notification while the phone is away waits, and shows when it comes back.
        setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("ring", {"text": "The laundry is done."}),)), Reply("Told you.")])
        await alice.chat("ring me")
        await asyncio.sleep(0.3)
        await context.set_offline(False)
        await page.goto(f"{BASE}/app/#list")
        await page.wait_for_selector(".waited >> text=The laundry is done.")

        # Voice replies: the settings switch speaks a sample through the server's TTS.
        if shutil.which("espeak-ng"):
            await page.goto(f"{BASE}/app/#settings")
            await page.tap("input[name=voice]")
            await page.wait_for_selector("body[data-spoke='1']")
            assert await page.is_checked("input[name=voice]")

        # Unlinked from the web page: the phone is refused and back at pairing.
        me = await page.evaluate(f"fetch('{BASE}/me', {{headers: {{Authorization: 'Bearer ' + localStorage.getItem('skald.mobile.token')}}}}).then(r => r.json())")
        assert (await alice.delete(f"{BASE}/devices/{me['device_id']}")).status_code == 200
        await page.wait_for_selector("text=This phone is no longer paired")
        await page.wait_for_selector("input[name=code]")
    finally:
        await context.close()
    assert problems == []


async def test_a_locked_member_can_still_write_and_the_app_says_when_it_arrives(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    context = await browser.new_context(base_url=setup.host.url, viewport=PHONE, is_mobile=True, has_touch=True, locale="en-US")
    problems: list[str] = []
    page = await context.new_page()
    page.set_default_timeout(10_000)
    page.on("pageerror", lambda error: problems.append(f"error: {error}"))
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text or "Refused to" in m.text else None)
    try:
        await page.goto(f"{BASE}/app/")
        await page.fill("input[name=code]", await pairing_code(alice))
        await page.tap("button[type=submit]")
        setup.model.script(MODEL, [Reply("Hello there.")])
        await page.tap("text=New chat")
        await page.fill("textarea[name=text]", "hello")
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector("text=Hello there.")
        conversation = await page.evaluate("JSON.parse(localStorage.getItem('skald.mobile.cache')).last")

        assert (await alice.post("/api/auth/logout")).status_code == 200  # her file closes
        await page.goto(f"{BASE}/app/#list")
        await page.wait_for_selector(".locked >> text=Log in to Skald on the web")
        setup.model.script(MODEL, [Reply("Welcome back; I read it.")])
        await page.fill("textarea[name=text]", "canary-91c4 from a locked phone")
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".sealed >> text=will be delivered when you next sign in on the web")
        await page.wait_for_selector(".message >> text=canary-91c4 from a locked phone")

        assert (await alice.login("alice", "member password for tests")).status_code == 200
        for _ in range(300):
            messages = (await alice.get(f"{BASE}/conversations/{conversation}")).json()["messages"]
            if any(m["role"] == "assistant" and m["content"] == "Welcome back; I read it." for m in messages):
                break
            await asyncio.sleep(0.05)
        assert [m["content"] for m in messages if m["role"] == "user"] == ["hello", "canary-91c4 from a locked phone"]
        assert messages[-1]["content"] == "Welcome back; I read it."
    finally:
        await context.close()
    assert problems == []


async def _paired_app(setup, browser, member, problems: list[str], *, german: bool = False):
    """A phone-sized page with the app paired to ``member``, on its conversation list;
    ``german``: the member's account and the phone speak German."""
    if german:
        assert (await member.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    context = await browser.new_context(base_url=setup.host.url, viewport=PHONE, is_mobile=True, has_touch=True, locale="de-DE" if german else "en-US")
    page = await context.new_page()
    page.set_default_timeout(15_000)
    page.on("pageerror", lambda error: problems.append(f"error: {error}"))
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text or "Refused to" in m.text else None)
    await page.goto(f"{BASE}/app/")
    await page.fill("input[name=code]", await pairing_code(member))
    await page.tap("button[type=submit]")
    await page.wait_for_selector("text=Neuer Chat" if german else "text=New chat")
    return context, page


@contextlib.asynccontextmanager
async def _app(setup, browser, member, *, german: bool = False):
    """``_paired_app`` for the length of a block, its context closed after it; at the end
    no page error or CSP refusal was seen (``_paired_app`` collects them). One copy for
    the app's browser tests, which each wanted the same."""
    problems: list[str] = []
    context, page = await _paired_app(setup, browser, member, problems, german=german)
    try:
        yield context, page
    finally:
        await context.close()
    assert problems == []


async def _send(page, text: str) -> None:
    await page.fill("textarea[name=text]", text)
    await page.tap("button:has-text('Send')")
    await page.wait_for_selector(f".message.user >> text={text}")


async def _shown_messages(page) -> list[str]:
    """The chat's bubbles in order, each by its first line (a stopped answer's label below)."""
    return await page.locator("#messages .message").evaluate_all("(nodes) => nodes.map((n) => n.innerText.split('\\n')[0].trim())")


async def test_the_locked_app_goes_on_by_itself_when_the_member_logs_in_on_the_web(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    problems: list[str] = []
    context, page = await _paired_app(setup, browser, alice, problems)
    try:
        assert (await alice.post("/api/auth/logout")).status_code == 200  # her file closes
        await page.goto(f"{BASE}/app/#list")
        await page.wait_for_selector(".locked >> text=Log in to Skald on the web")
        # The app is left open; the member logs in on the web.
        assert (await alice.login("alice", "member password for tests")).status_code == 200
        await page.wait_for_selector("text=New chat", timeout=20_000)
        assert await page.locator(".locked").count() == 0
        # And the other way: logged out everywhere, the open app says so by itself.
        assert (await alice.post("/api/auth/logout")).status_code == 200
        await page.wait_for_selector(".locked >> text=Log in to Skald on the web", timeout=20_000)
    finally:
        await context.close()
    assert problems == []


async def test_words_before_a_tool_call_keep_their_bubble_and_a_stop_on_the_web_ends_the_answer(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    await setup.host.allow_tool("write_note")
    problems: list[str] = []
    context, page = await _paired_app(setup, browser, alice, problems)
    try:
        await page.tap("text=New chat")
        await page.wait_for_selector("textarea[name=text]")
        # A new round after the tool call streams into a bubble of its own ...
        setup.model.script(MODEL, [
            Reply("Let me write it.", tool_calls=(ToolCall("write_note", {"text": "milk"}),)),
            Reply("I wrote it down just now, as you asked me to.", token_delay=0.15),
        ])
        await _send(page, "note milk")
        await page.wait_for_selector(".message.assistant:not(.streaming) >> text=as you asked me to.")
        # ... and so does one that ends before it sent a partial.
        setup.model.script(MODEL, [Reply("One moment.", tool_calls=(ToolCall("write_note", {"text": "eggs"}),)), Reply("Done.")])
        await _send(page, "note eggs")
        await page.wait_for_selector(".message.assistant >> text=Done.")
        expected = ["note milk", "Let me write it.", "I wrote it down just now, as you asked me to.", "note eggs", "One moment.", "Done."]
        assert await _shown_messages(page) == expected

        # Stopped on the web while the answer streams: it ends with what it had said,
        # marked stopped, and the app no longer shows it running.
        setup.model.script(MODEL, [Hang("thinking very hard")])
        await _send(page, "think")
        await page.wait_for_selector(".message.assistant.streaming >> text=thinking very hard")
        conversation = await page.evaluate("JSON.parse(localStorage.getItem('skald.mobile.cache')).last")
        assert (await alice.post(f"/api/conversations/{conversation}/stop")).json() == {"stopped": True}
        stopped = page.locator(".message.assistant.stopped")
        await stopped.wait_for()
        assert "thinking very hard" in await stopped.inner_text() and "Stopped" in await stopped.inner_text()
        await page.locator("button:has-text('Stop')").wait_for(state="hidden")
        assert await page.locator(".typing").is_hidden() and await page.locator(".streaming").count() == 0
        live = await _shown_messages(page)
        assert live == [*expected, "think", "thinking very hard"]

        # A reload shows the same.
        await page.reload()
        await page.wait_for_selector(".message.assistant.stopped >> text=thinking very hard")
        assert await _shown_messages(page) == live
    finally:
        await context.close()
    assert problems == []


async def test_a_message_sent_while_an_approval_waits_shows_below_the_answer_it_waited_for(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    problems: list[str] = []
    context, page = await _paired_app(setup, browser, alice, problems)
    try:
        setup.model.script(MODEL, [
            Reply(tool_calls=(ToolCall("write_note", {"text": "milk"}),)),
            Reply("Noted milk on your list, as you asked.", token_delay=0.1),
            Reply("Eggs noted too."),
        ])
        await page.tap("text=New chat")
        await page.wait_for_selector("textarea[name=text]")
        await _send(page, "note milk")
        await page.wait_for_selector(".approval >> text=write_note")
        await _send(page, "and eggs")  # queued behind the turn that waits
        await page.tap(".approval button:has-text('Approve')")
        await page.wait_for_selector(".message.assistant >> text=Eggs noted too.")
        live = await _shown_messages(page)
        assert live == ["note milk", "Noted milk on your list, as you asked.", "and eggs", "Eggs noted too."]
        await page.reload()
        await page.wait_for_selector(".message.assistant >> text=Eggs noted too.")
        assert await _shown_messages(page) == live
    finally:
        await context.close()
    assert problems == []


async def test_a_long_answer_ending_in_math_is_followed_to_its_end(setup, browser):
    """The answer is redrawn whole as it ends, and its math grows once KaTeX arrives:
    the view stopped 355 px short of the formula (a regression walk)."""
    alice = await setup.host.member("alice", display_name="Alice")
    long = " ".join(f"Sentence {i} of the long answer." for i in range(60))
    setup.model.script(MODEL, [Reply(long + "\n\n$$\\int_0^1 x\\,dx = \\frac{1}{2}$$", token_delay=0.001)])
    problems: list[str] = []
    context, page = await _paired_app(setup, browser, alice, problems)
    try:
        await page.tap("text=New chat")
        await page.wait_for_selector("textarea[name=text]")
        await _send(page, "Explain it at length.")
        await page.wait_for_selector("#messages .message.assistant:not(.streaming) .katex")
        await page.wait_for_function(
            "() => { const v = document.getElementById('view'); return v.scrollHeight - v.scrollTop - v.clientHeight < 4; }"
        )
    finally:
        await context.close()
    assert problems == []


# Where the chat's composer ends and what is drawn below it, at the phone's viewport.
COMPOSER_EDGE = """() => {
  const box = document.querySelector("form.composer").getBoundingClientRect();
  const below = document.elementFromPoint(innerWidth / 2, innerHeight - 2);
  return { bottom: Math.round(box.bottom), height: innerHeight, under: !!below?.closest("form.composer") };
}"""


async def test_the_composer_sits_flush_with_the_bottom_of_the_phone_screen(setup, browser):
    """It stood 12 px above the bottom (the view's padding), the chat scrolling by under it,
    and in a new chat it stood under the last message, mid-screen."""
    alice = await setup.host.member("alice", display_name="Alice")
    problems: list[str] = []
    context, page = await _paired_app(setup, browser, alice, problems)
    try:
        await page.tap("text=New chat")
        await page.wait_for_selector("textarea[name=text]")
        assert await page.evaluate(COMPOSER_EDGE) == {"bottom": PHONE["height"], "height": PHONE["height"], "under": True}

        # A chat longer than the screen: the composer stays at the bottom, nothing shows under it.
        setup.model.script(MODEL, [Reply(" ".join(f"Line {i} of a long answer." for i in range(120)))])
        await _send(page, "Say a lot.")
        await page.wait_for_selector(".message.assistant >> text=Line 119 of a long answer.")
        await page.evaluate("document.getElementById('view').scrollTop = 400")
        assert await page.evaluate(COMPOSER_EDGE) == {"bottom": PHONE["height"], "height": PHONE["height"], "under": True}
    finally:
        await context.close()
    assert problems == []


async def test_the_attach_button_draws_a_paperclip_not_an_emoji(setup, browser):
    """"📎" alone is a box on a phone without an emoji font: the button draws its icon."""
    alice = await setup.host.member("alice", display_name="Alice")
    problems: list[str] = []
    context, page = await _paired_app(setup, browser, alice, problems)
    try:
        await page.tap("text=New chat")
        attach = page.get_by_role("button", name="Attach a photo or file", exact=True)
        await attach.wait_for()
        drawn = await attach.evaluate(
            """(button) => {
              const svg = button.querySelector("svg");
              const box = svg?.getBoundingClientRect();
              return { text: button.textContent.trim(), svg: !!svg, hidden: svg?.getAttribute("aria-hidden"),
                       stroke: svg && getComputedStyle(svg).stroke, color: getComputedStyle(button).color,
                       size: box ? [Math.round(box.width), Math.round(box.height)] : null };
            }"""
        )
        assert (drawn["text"], drawn["svg"], drawn["hidden"]) == ("", True, "true"), drawn
        assert drawn["stroke"] == drawn["color"], drawn  # the button's text colour, in either theme
        assert drawn["size"][0] >= 16 and drawn["size"][1] >= 16, drawn
    finally:
        await context.close()
    assert problems == []
