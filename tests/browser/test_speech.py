"""The read-aloud button on each answer, in chromium against a real host: it appears on
a finished answer (live and after a reload), sends the answer's text to /api/tts in the
body, plays the streamed WAV through Web Audio and returns to idle when it ends."""

from __future__ import annotations

import json
import shutil

import pytest
from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model, send

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (apt-get install espeak-ng)")


async def test_an_answer_is_read_aloud_from_its_button(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("alice", display_name="Alice")
        server.script(MODEL, [Reply(text="**Hello** Alice. The [weather](https://example.org) is fine today.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "alice", MEMBER_PASSWORD)
        await send(page, "Hi!")
        button = page.locator(".msg.assistant .read-aloud")
        await expect(button).to_have_count(1)
        await expect(button).to_have_attribute("aria-label", "Read aloud")
        # A drawn icon, not an emoji (which showed as an empty box without an emoji font).
        assert (await button.inner_text()).strip() == ""
        mask = await button.locator(".speaker-icon").evaluate("(n) => getComputedStyle(n).maskImage || getComputedStyle(n).webkitMaskImage")
        assert "/ui/vendor/lucide/shell/volume-2.svg" in mask, mask
        assert (await page.request.get("/ui/vendor/lucide/shell/volume-2.svg")).headers["content-type"].startswith("image/svg+xml")

        async with page.expect_response("**/api/tts") as answered:
            await button.click()
        response = await answered.value
        assert response.status == 200 and response.headers["content-type"].startswith("audio/wav")
        assert response.headers["x-skald-voice"] == "espeak-ng:en-us"
        sent = json.loads(response.request.post_data)
        assert "The [weather](https://example.org) is fine today." in sent["text"]
        assert "Alice" not in response.request.url  # the text is in the body, not the URL
        await expect(button).to_have_attribute("data-state", "playing")
        await expect(button).to_have_attribute("aria-label", "Stop reading")
        # ~3 s of speech, played to the end, and the button is ready again.
        await expect(button).to_have_attribute("data-state", "idle", timeout=20000)

        # Stop in the middle: a second click ends the reading at once.
        await button.click()
        await expect(button).to_have_attribute("data-state", "playing")
        await button.click()
        await expect(button).to_have_attribute("data-state", "idle")

        # After a reload the stored answer has its button too.
        await page.reload()
        await expect(page.locator(".msg.assistant .read-aloud")).to_have_count(1)


async def test_a_refused_reading_is_said_in_the_readers_language(skald, browser_pages):
    """The server's refusal carries a code: a German member reads why in German, not
    the English sentence the API also sends."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(settings=skald.settings(tts={"max_chars": 20}))
        await configure_model(await host.admin(), server)
        await host.create_member("greta", display_name="Greta")
        server.script(MODEL, [Reply(text="Das Wetter ist heute schön und warm.")])
        page = await browser_pages.new(host.url)
        await sign_in(page, "greta", MEMBER_PASSWORD)
        await page.goto("/#account")
        await page.get_by_label("Interface language").select_option("de")
        await page.locator("form.language-form").get_by_role("button", name="Save").click()
        await expect(page.get_by_role("heading", name="Mein Konto", exact=True)).to_be_visible()
        await page.goto("/#chat")
        box = page.get_by_role("textbox", name="Nachricht")
        await box.fill("Wie ist das Wetter?")
        await box.press("Enter")
        button = page.locator(".msg.assistant .read-aloud")
        async with page.expect_response("**/api/tts") as answered:
            await button.click()
        response = await answered.value
        assert response.status == 400
        assert (await response.json())["code"] == "tts_too_long"
        await expect(button).to_have_attribute("data-state", "failed")
        await expect(button).to_have_attribute(
            "title", "Vorlesen nicht möglich: Dieser Text hat 36 Zeichen; vorgelesen werden höchstens 20."
        )
