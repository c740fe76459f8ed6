"""The member's voice page in a real browser (chromium through Playwright): every
engine's voices, the choice saved in the member's private settings, a sample played
through the host's /api/tts with the chosen voice, German strings for a German member."""

from __future__ import annotations

import json
import shutil

import pytest

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD



@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
async def test_a_member_picks_a_voice_and_hears_a_sample(skald, plugin_browser):
    host = await skald.start(use_entry_points=True, enable=["tts_kokoro"])
    member = await host.member("greta", locale="de")
    pages = (await member.get("/api/plugins/pages")).json()["pages"]
    assert any(p["plugin_id"] == "tts_kokoro" and p["page_id"] == "voices" for p in pages)
    script = await member.get("/api/plugin/tts_kokoro/page.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert ".innerHTML" not in script.text and "insertAdjacentHTML" not in script.text

    page = await plugin_browser.open(host, "greta", MEMBER_PASSWORD, "tts_kokoro", "voices")
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    root = page.locator("skald-p-tts-kokoro-voices")
    await root.locator("label").filter(has_text="Stimme").wait_for(timeout=10_000)  # the title is the shell's header
    values = await root.locator("select option").evaluate_all("options => options.map(o => o.value)")
    assert values[0] == "" and "kokoro:jf_alpha" in values and "espeak-ng:de" in values

    await root.locator("select").select_option("kokoro:jf_alpha")
    await root.locator(".tts-message").filter(has_text="Gespeichert.").wait_for(timeout=10_000)
    greta = await host.core.users.find("greta")
    assert await host.core.tts.preferred_voice(host.core.users.owner_db(greta.id)) == "kokoro:jf_alpha"

    async with page.expect_response("**/api/tts", timeout=30_000) as answered:
        await root.locator(".tts-sample").click()
    response = await answered.value
    assert response.status == 200 and response.headers["x-skald-voice"] == "kokoro:jf_alpha"
    sent = json.loads(response.request.post_data)
    assert sent["voice"] == "kokoro:jf_alpha" and sent["locale"] == "en"  # Kokoro speaks no German: the sample is English

    await root.locator("select").select_option("espeak-ng:de")
    async with page.expect_response("**/api/tts", timeout=30_000) as answered:
        await root.locator(".tts-sample").click()
    response = await answered.value
    assert response.headers["x-skald-voice"] == "espeak-ng:de"
    assert json.loads(response.request.post_data)["text"].startswith("Hallo!")
    assert errors == []


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
async def test_a_broken_model_is_said_plainly_to_a_member_and_in_full_to_the_admin(skald, plugin_browser, tmp_path):
    """The Voice page printed the admin's model path and onnxruntime's error to every
    member; a member reads that Kokoro is not available, in their language."""
    missing = tmp_path / "nowhere" / "kokoro.onnx"
    host = await skald.start(use_entry_points=True, enable=["tts_kokoro"])
    admin = await host.admin()
    response = await admin.put("/api/admin/plugins/tts_kokoro/config", json={"config": {"model_path": str(missing)}})
    assert response.status_code == 200, response.text
    await host.member("greta", locale="de")

    page = await plugin_browser.open(host, "greta", MEMBER_PASSWORD, "tts_kokoro", "voices")
    message = page.locator("skald-p-tts-kokoro-voices .tts-message")
    await message.filter(has_text="Die Sprachausgabe kokoro ist gerade nicht verfügbar.").wait_for(timeout=10_000)
    assert str(tmp_path) not in await message.inner_text() and "model_path" not in await page.content()

    page = await plugin_browser.open(host, "admin", ADMIN_PASSWORD, "tts_kokoro", "voices")
    message = page.locator("skald-p-tts-kokoro-voices .tts-message")
    await message.filter(has_text=f"model_path {str(missing)!r} is not a file").wait_for(timeout=10_000)
