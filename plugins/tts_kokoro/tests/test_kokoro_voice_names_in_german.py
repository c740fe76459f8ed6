"""The voice page in German names espeak-ng's voices in German (the browser's own
language names, from each voice's code), as it names Kokoro's, and leaves the title to
the shell's header (no h1 of its own)."""

from __future__ import annotations

import shutil

import pytest

from skald_host.testing.host import MEMBER_PASSWORD


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
async def test_espeak_voices_are_named_in_the_members_language(skald, plugin_browser):
    host = await skald.start(use_entry_points=True, enable=["tts_kokoro"])
    await host.member("greta", locale="de")
    page = await plugin_browser.open(host, "greta", MEMBER_PASSWORD, "tts_kokoro", "voices")
    root = page.locator("skald-p-tts-kokoro-voices")
    await root.locator("label").filter(has_text="Stimme").wait_for(timeout=10_000)
    option = lambda voice: root.locator(f"select option[value='{voice}']")  # noqa: E731
    assert await option("espeak-ng:ar").inner_text() == "Arabisch (espeak-ng)"
    assert await option("espeak-ng:cs").inner_text() == "Tschechisch (espeak-ng)"
    assert await option("espeak-ng:de").inner_text() == "Deutsch (espeak-ng)"
    assert (await option("kokoro:jf_alpha").inner_text()).endswith("— Englisch")
    assert "Arabisch" in await root.locator(".tts-languages").inner_text()
    assert await root.locator("h1").count() == 0
