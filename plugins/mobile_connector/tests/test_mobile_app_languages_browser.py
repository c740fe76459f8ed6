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

        # Paired: the phone's language stays (the account's "de" may be only the
        # instance's default, which the contract does not tell apart from a choice).
        await page.fill("input[name=code]", await pairing_code(bea))
        await page.tap("button[type=submit]")
        await page.wait_for_selector("text=New chat")
        assert await page.evaluate("document.documentElement.lang") == "pt-BR"

        # The languages are the server's files, each named in its own words.
        await page.goto(f"{BASE}/app/#settings")
        select = page.locator("select[name=language]")
        await select.wait_for()
        options = await select.locator("option").evaluate_all("(nodes) => nodes.map((n) => [n.value, n.textContent])")
        assert [value for value, _ in options] == ["de", "en", "pt-BR"]
        names = dict(options)
        assert (names["de"], names["en"]) == ("Deutsch", "English")
        assert names["pt-BR"].lower().startswith("português"), names

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
