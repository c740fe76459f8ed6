"""Adding a language to the phone app is adding a file: the app offered only the
English and German it was written with (named by hand) and matched the phone's language
by its first two letters (a ``pt-BR`` file was never chosen)."""

from __future__ import annotations

import pytest
import pytest_asyncio

from mobile_support import BASE, mobile_host, pairing_code
from test_mobile_app_browser import PHONE


@pytest.fixture
def browser(plugin_browser):
    return plugin_browser.browser


@pytest_asyncio.fixture
async def setup(skald, monkeypatch):
    """The plugin with a third locale file, ``pt-BR.json``, as a translator adds it."""
    import skald_mobile_connector
    from skald_mobile_connector import routes, strings

    table = {**strings.STRINGS, "pt-BR": {**strings.STRINGS["en"], "pair_title": "Parear este celular"}}
    monkeypatch.setattr(skald_mobile_connector, "STRINGS", table)
    monkeypatch.setattr(routes, "STRINGS", table)
    async with mobile_host(skald) as started:
        yield started


async def test_the_app_speaks_the_phones_region_language_and_names_each_language_in_its_own(setup, browser):
    bea = await setup.host.member("bea", display_name="Bea")
    assert (await bea.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    context = await browser.new_context(base_url=setup.host.url, viewport=PHONE, is_mobile=True, has_touch=True, locale="pt-BR")
    page = await context.new_page()
    page.set_default_timeout(10_000)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"error: {error}"))
    try:
        # Before pairing: the phone's language, its whole tag.
        await page.goto(f"{BASE}/app/")
        await page.wait_for_selector("text=Parear este celular")
        assert await page.evaluate("document.documentElement.lang") == "pt-BR"

        # Paired: the account's language ("de", Bea's choice on the web), as the web
        # shows it to her, not the phone's.
        await page.fill("input[name=code]", await pairing_code(bea))
        await page.tap("button[type=submit]")
        await page.wait_for_selector("text=Neuer Chat")
        assert await page.evaluate("document.documentElement.lang") == "de"

        # The languages are the server's files, each named in its own words, after the
        # account's (the default, chosen now).
        await page.goto(f"{BASE}/app/#settings")
        select = page.locator("select[name=language]")
        await select.wait_for()
        options = await select.locator("option").evaluate_all("(nodes) => nodes.map((n) => [n.value, n.textContent])")
        assert [value for value, _ in options] == ["", "de", "en", "pt-BR"]
        names = dict(options)
        assert (names[""], names["de"], names["en"]) == ("Wie in deinem Konto (Deutsch)", "Deutsch", "English")
        assert names["pt-BR"].lower().startswith("português"), names
        assert await select.input_value() == ""

        # A language chosen in the app's settings stays this phone's, over the account's.
        await select.select_option("en")
        await page.wait_for_function("() => document.documentElement.lang === 'en'")
        await page.goto(f"{BASE}/app/#list")
        await page.reload()
        await page.wait_for_selector("text=New chat")
        assert await page.evaluate("document.documentElement.lang") == "en"
    finally:
        await context.close()
    assert problems == []


async def test_a_paired_app_speaks_the_account_language_on_a_phone_set_to_another(setup, browser):
    """A German member on an en-US phone saw English: the app knew only its own setting
    and the phone's language. Paired, it speaks the account's; a language chosen in the
    app wins, and choosing the account's again follows the account. The push
    notification's words follow too (the service worker reads what the app keeps)."""
    anna = await setup.host.member("anna", display_name="Anna")
    assert (await anna.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    context = await browser.new_context(base_url=setup.host.url, viewport=PHONE, is_mobile=True, has_touch=True, locale="en-US")
    page = await context.new_page()
    page.set_default_timeout(10_000)
    push_words = """async () => {
        const hit = await (await caches.open("skald-mobile-push-words")).match(new URL("push-words", location.href).href);
        return hit ? (await hit.json()).body : null; }"""
    try:
        await page.goto(f"{BASE}/app/")
        await page.wait_for_selector("text=Pair this phone")  # unpaired: the phone's language
        await page.fill("input[name=code]", await pairing_code(anna))
        await page.tap("button[type=submit]")
        await page.wait_for_selector("text=Neuer Chat")
        assert await page.evaluate("document.documentElement.lang") == "de"
        assert await page.evaluate(push_words) == "Es gibt etwas Neues für dich."

        await page.reload()  # the next start speaks German at once
        await page.wait_for_selector("text=Neuer Chat")

        await page.goto(f"{BASE}/app/#settings")
        select = page.locator("select[name=language]")
        await select.select_option("en")
        await page.wait_for_function("() => document.documentElement.lang === 'en'")
        assert await page.evaluate(push_words) == "You have something new."
        await page.goto(f"{BASE}/app/#list")
        await page.reload()
        await page.wait_for_selector("text=New chat")  # the app's own choice stays

        await page.goto(f"{BASE}/app/#settings")
        await page.locator("select[name=language]").select_option("")
        await page.wait_for_function("() => document.documentElement.lang === 'de'")
        await page.goto(f"{BASE}/app/#list")
        await page.reload()
        await page.wait_for_selector("text=Neuer Chat")
    finally:
        await context.close()


def test_the_push_words_are_the_apps_not_the_service_workers():
    """sw.js held English and German by hand and chose by the phone's language."""
    from pathlib import Path

    sw = (Path(__file__).resolve().parents[1] / "skald_mobile_connector" / "app" / "sw.js").read_text()
    assert "Es gibt etwas Neues" not in sw and "navigator.language" not in sw
    import re

    assert int(re.search(r'const CACHE = "skald-mobile-v(\d+)"', sw).group(1)) >= 8  # bumped then: the old shell goes


@pytest.mark.parametrize(("accept", "lang", "description"), [
    ("de-DE,de;q=0.9,en;q=0.8", "de", "Dein Skald-Assistent auf deinem Handy."),
    ("fr-FR,fr;q=0.9", "en", "Your Skald assistant on your phone."),
])
async def test_the_shell_and_its_manifest_are_served_in_the_readers_language(setup, accept, lang, description):
    """index.html began lang="en" until the script replaced it, and the manifest
    described the installed app in English for everyone."""
    client = setup.host.client()
    page = await client.get(f"{BASE}/app/", headers={"Accept-Language": accept})
    assert page.status_code == 200 and f'<html lang="{lang}">' in page.text
    manifest = await client.get(f"{BASE}/app/manifest.webmanifest", headers={"Accept-Language": accept})
    assert manifest.status_code == 200 and manifest.headers["content-type"].startswith("application/manifest+json")
    assert (manifest.json()["lang"], manifest.json()["description"]) == (lang, description)
    assert "Accept-Language" in manifest.headers.get("vary", "")
