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


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
async def test_the_voices_are_sorted_by_their_names_and_none_reads_like_another(skald, plugin_browser):
    """The options came in espeak-ng's code order (de, el, en, ...: "Deutsch, Griechisch,
    Englisch"), and its Chinese voices read "Chinesisch (espeak-ng)" twice."""
    host = await skald.start(use_entry_points=True, enable=["tts_kokoro"])
    await host.member("greta", locale="de")
    page = await plugin_browser.open(host, "greta", MEMBER_PASSWORD, "tts_kokoro", "voices")
    root = page.locator("skald-p-tts-kokoro-voices")
    await root.locator("label").filter(has_text="Stimme").wait_for(timeout=10_000)
    groups = await root.locator("select optgroup").evaluate_all(
        "(groups) => groups.map((g) => [g.label, [...g.querySelectorAll('option')].map((o) => o.textContent)])"
    )
    espeak = dict(groups)["espeak-ng"]
    assert len(espeak) > 20, espeak
    assert len(set(espeak)) == len(espeak), sorted(t for t in espeak if espeak.count(t) > 1)
    ordered = await page.evaluate("(texts) => [...texts].sort(new Intl.Collator('de', {sensitivity: 'base', numeric: true}).compare)", espeak)
    assert espeak == ordered
    for _label, texts in groups:
        assert len(set(texts)) == len(texts), texts
