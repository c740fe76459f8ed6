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
