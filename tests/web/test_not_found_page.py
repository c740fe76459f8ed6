"""A mistyped address outside the shell's ``#`` routes (``/einstellungen``) answers a
browser with a small 404 page in the reader's language and a link home; it used to be
the API's English JSON, with no page and no way back. The API, and any client that does
not ask for HTML first, keeps the JSON answer exactly as it was."""

from __future__ import annotations

import re

from skald_host.testing.host import MEMBER_PASSWORD

#: What Chromium sends when a person opens an address.
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
NOT_FOUND_JSON = {"error": "not found", "code": "not_found"}


def lang_of(page: str) -> str | None:
    found = re.search(r"<html lang=\"([^\"]+)\"[ >]", page)
    return found.group(1) if found else None


async def test_a_mistyped_address_opened_in_a_browser_answers_a_page_in_english_with_a_link_home(skald):
    host = await skald.start()
    await host.setup_admin()
    for path in ("/einstellungen", "/foo", "/ui/nope.js"):
        response = await host.client().get(path, headers={"Accept": BROWSER_ACCEPT, "Accept-Language": "en-US,en;q=0.9"})
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html"), path
        page = response.text
        assert lang_of(page) == "en"
        assert "<main" in page and "<h1>Page not found</h1>" in page
        assert '<a class="btn primary" href="/">Go to the start page</a>' in page
        assert '<link rel="stylesheet" href="/ui/app.css">' in page


async def test_the_page_speaks_the_browsers_language_else_the_signed_in_members(skald):
    host = await skald.start()
    await host.setup_admin()
    german_browser = await host.client().get("/einstellungen", headers={"Accept": BROWSER_ACCEPT, "Accept-Language": "de-DE,de;q=0.9,en;q=0.8"})
    assert (german_browser.status_code, lang_of(german_browser.text)) == (404, "de")
    assert "<h1>Seite nicht gefunden</h1>" in german_browser.text and ">Zur Startseite</a>" in german_browser.text
    unknown_language = await host.client().get("/einstellungen", headers={"Accept": BROWSER_ACCEPT, "Accept-Language": "fr-FR,fr;q=0.9"})
    assert lang_of(unknown_language.text) == "en"
    # A signed-in member reads their own language, whatever the browser says.
    await host.create_member("greta", locale="de")
    greta = host.client()
    assert (await greta.login("greta", MEMBER_PASSWORD)).status_code == 200
    signed_in = await greta.get("/foo", headers={"Accept": BROWSER_ACCEPT, "Accept-Language": "en-US,en;q=0.9"})
    assert (signed_in.status_code, lang_of(signed_in.text)) == (404, "de")
    assert "<h1>Seite nicht gefunden</h1>" in signed_in.text


async def test_the_api_and_clients_that_ask_for_json_keep_the_json_answer(skald):
    host = await skald.start()
    admin = await host.admin()
    for client, path, accept in (
        (admin, "/api/admin/no-such-route", BROWSER_ACCEPT),  # an API address opened in a browser
        (admin, "/api/no-such-route", "text/html"),
        (host.client(), "/einstellungen", "application/json"),
        (host.client(), "/ui/nope.js", "*/*"),  # a script's import, or fetch's default
        (host.client(), "/foo", "application/json, text/plain, */*"),
    ):
        response = await client.get(path, headers={"Accept": accept})
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("application/json"), (path, accept)
        assert response.json() == NOT_FOUND_JSON, (path, accept)
    posted = await host.client().post("/einstellungen", headers={"Accept": BROWSER_ACCEPT})
    assert posted.headers["content-type"].startswith("application/json")
