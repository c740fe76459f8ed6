"""What the composer holds survives the chat's screen being built again: the network
coming back rebuilt it (``online`` → start → route → chatScreen) and the words typed
while offline, when Send waits, were gone, nothing kept for them; a reload lost them too.
The README promises nothing typed is lost. Also the files: uploaded into a conversation,
or chosen in a new chat that has none yet. And the member's data locked and unlocked
meanwhile (the stream's hello) gives them back too."""

from __future__ import annotations

import json

import pytest

from skald_host.testing import Reply
from mobile_support import BASE, MODEL
from test_mobile_app_browser import PNG, _app, _send

COMPOSER = "textarea[name=text]"
# The chat's screen was built again (a new composer), and Send works again.
REBUILT_AND_ONLINE = """() => {
  const box = document.querySelector('textarea[name=text]');
  const send = document.querySelector('form.composer button[type=submit]');
  return box && box !== window.__composerBefore && send && !send.disabled && document.getElementById('banner').hidden;
}"""


@pytest.fixture
def browser(plugin_browser):
    return plugin_browser.browser


async def _offline_then_back(context, page, typed: str) -> None:
    """Offline (Send waits), ``typed`` into the composer, then the network back: the app
    rebuilds the chat's screen (waited for, so the check after it is not early)."""
    await context.set_offline(True)
    await page.wait_for_selector("#banner >> text=Offline", timeout=15_000)
    assert await page.locator("button:has-text('Send')").is_disabled()
    await page.locator(COMPOSER).press_sequentially(typed)
    await page.evaluate("() => { window.__composerBefore = document.querySelector('textarea[name=text]'); }")
    await context.set_offline(False)
    await page.wait_for_function(REBUILT_AND_ONLINE, timeout=15_000)


async def _drafts(page) -> dict:
    return json.loads(await page.evaluate("localStorage.getItem('skald.mobile.drafts') || '{}'"))


async def _photo(page, tmp_path) -> None:
    photo = tmp_path / "photo.png"
    photo.write_bytes(PNG)
    await page.set_input_files("input[type=file]", str(photo))
    await page.wait_for_selector("ul.attached >> text=photo.png")


def _with_photo(request) -> bool:
    last = next(m for m in reversed(request.messages) if m.get("role") == "user")
    return "The member attached these files" in str(last) and "photo" in str(last)


async def test_words_typed_offline_and_an_uploaded_photo_survive_the_network_coming_back_and_a_reload(setup, browser, tmp_path):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await page.tap("text=New chat")
        await page.wait_for_selector(COMPOSER)
        setup.model.script(MODEL, [Reply("Hello there.")])
        await _send(page, "first words")
        await page.wait_for_selector(".message.assistant >> text=Hello there.")
        await page.wait_for_function("() => location.hash.startsWith('#chat/')")
        conversation = await page.evaluate("decodeURIComponent(location.hash.slice(6))")
        await _photo(page, tmp_path)  # uploaded at once: the conversation exists

        await _offline_then_back(context, page, "typed while offline")
        assert await page.input_value(COMPOSER) == "typed while offline"
        assert await page.locator("ul.attached >> text=photo.png").count() == 1
        kept = (await _drafts(page))[conversation]
        assert kept["typed"] == "typed while offline" and [a["name"] for a in kept["attachments"]] == ["photo.png"]

        # A reload (the app closed and opened again) gives them back as well.
        await page.reload()
        await page.wait_for_selector(".message.assistant >> text=Hello there.")
        assert await page.input_value(COMPOSER) == "typed while offline"
        assert await page.locator("ul.attached >> text=photo.png").count() == 1

        # Sent: the server has words and photo, and the draft is gone.
        setup.model.script(MODEL, [Reply("Got it.")])
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".message.assistant >> text=Got it.")
        assert _with_photo(setup.model.requests[-1])
        assert await page.input_value(COMPOSER) == ""
        assert await _drafts(page) == {}
        await page.reload()
        await page.wait_for_selector(".message.assistant >> text=Got it.")
        assert await page.input_value(COMPOSER) == "" and await page.locator("ul.attached").is_hidden()


async def test_a_new_chat_keeps_its_words_and_chosen_photo_when_the_network_comes_back(setup, browser, tmp_path):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await page.tap("text=New chat")
        await page.wait_for_selector(COMPOSER)
        await _photo(page, tmp_path)  # waits on the phone: the chat has no conversation yet

        await _offline_then_back(context, page, "typed while offline")
        assert await page.input_value(COMPOSER) == "typed while offline"
        assert await page.locator("ul.attached >> text=photo.png").count() == 1

        setup.model.script(MODEL, [Reply("A new chat with a photo.")])
        await page.tap("button:has-text('Send')")
        await page.wait_for_selector(".message.assistant >> text=A new chat with a photo.")
        assert _with_photo(setup.model.requests[-1])
        assert await _drafts(page) == {}
        # The next new chat starts empty.
        await page.goto(f"{BASE}/app/#list")
        await page.tap("text=New chat")
        await page.wait_for_selector(COMPOSER)
        assert await page.input_value(COMPOSER) == "" and await page.locator("ul.attached").is_hidden()


async def test_words_in_a_chat_go_on_to_the_locked_screen_and_back_when_unlocked(setup, browser):
    alice = await setup.host.member("alice", display_name="Alice")
    async with _app(setup, browser, alice) as (context, page):
        await page.tap("text=New chat")
        await page.wait_for_selector(COMPOSER)
        setup.model.script(MODEL, [Reply("Hello there.")])
        await _send(page, "first words")
        await page.wait_for_selector(".message.assistant >> text=Hello there.")
        await page.locator(COMPOSER).press_sequentially("half a thought")

        assert (await alice.post("/api/auth/logout")).status_code == 200  # her file closes
        await page.wait_for_selector(".locked >> text=Log in to Skald on the web", timeout=20_000)
        assert await page.input_value(COMPOSER) == "half a thought"  # the locked screen's own composer
        await page.locator(COMPOSER).press_sequentially(", finished")

        assert (await alice.login("alice", "member password for tests")).status_code == 200
        await page.wait_for_selector(".message.assistant >> text=Hello there.", timeout=20_000)
        assert await page.locator(".locked").count() == 0
        assert await page.input_value(COMPOSER) == "half a thought, finished"
