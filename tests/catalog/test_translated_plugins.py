"""Everything a plugin shows outside its own page is read in the reader's language:
catalog title and description, page titles, settings labels and hints (well-known
keys of the plugin's own domain), and a third language arrives by files alone."""

from __future__ import annotations

from typing import Any

from .french import Greeter
from .support import member_id


async def ok(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return response.json()


async def set_locale(client: Any, locale: str | None) -> None:
    await ok(await client.put("/api/me/locale", json={"locale": locale}))


async def test_a_third_locale_from_files_is_offered_and_used(skald):
    host = await skald.start(plugins=[Greeter()], enable=["greeter"])
    public = host.client()
    assert "fr" in (await ok(await public.get("/api/setup")))["locales"]
    admin = await host.admin()
    alice = await host.member("alice")

    table = await ok(await alice.get("/api/i18n?locale=fr"))
    assert table["locales"] == ["de", "en", "fr"]
    assert table["locale"] == "fr"
    assert table["strings"]["core.nav.chat"] == "Discussion"
    assert table["strings"]["core.nav.memory"] == "Memory"  # not translated yet: English underneath
    # Each language is named in its own words, whatever the reader's language.
    german = (await ok(await alice.get("/api/i18n?locale=de")))["strings"]
    assert (german["core.locale.fr"], german["core.locale.de"], german["core.locale.en"]) == ("Français", "Deutsch", "English")

    await set_locale(alice, "fr")
    assert (await ok(await alice.get("/api/auth/session")))["locale"] == "fr"
    pages = (await ok(await alice.get("/api/plugins/pages")))["pages"]
    assert [(p["page_id"], p["title"]) for p in pages if p["plugin_id"] == "greeter"] == [("main", "Salutations")]
    mine = {p["id"]: p for p in (await ok(await alice.get("/api/plugins/mine")))["plugins"]}
    assert (mine["greeter"]["title"], mine["greeter"]["description"]) == ("Salueur", "Dit bonjour dans la langue du lecteur.")
    assert [(f["label"], f["description"]) for f in mine["greeter"]["user_config_schema"]] == [("Surnom", "Comment le salueur t'appelle.")]

    await set_locale(admin, "fr")
    settings = (await ok(await admin.get("/api/admin/settings")))["sets"]
    greeter_set = next(s for s in settings if s["id"] == "greeter-general")
    assert greeter_set["title"] == "Réglages du salueur"
    assert [f["label"] for f in greeter_set["fields"]] == ["Volume"]

    bad = await alice.put("/api/me/locale", json={"locale": "xx"})
    assert bad.status_code == 400 and "de, en, fr" in bad.json()["error"]


async def test_catalog_pages_and_settings_follow_the_readers_language(skald):
    host = await skald.start(plugins=[Greeter()], enable=["greeter"])
    admin = await host.admin()
    bob = await host.member("bob")

    async def views(client: Any) -> dict[str, Any]:
        catalog = {p["id"]: p for p in (await ok(await client.get("/api/admin/plugins")))["plugins"]}
        detail = await ok(await client.get("/api/admin/plugins/greeter"))
        pages = (await ok(await client.get("/api/plugins/pages")))["pages"]
        sets = (await ok(await client.get("/api/admin/settings")))["sets"]
        grants = (await ok(await client.get(f"/api/admin/members/{await member_id(host, 'bob')}/plugins")))["plugins"]
        return {
            "catalog": (catalog["greeter"]["title"], catalog["greeter"]["description"]),
            "builtin": (catalog["fs-tools"]["title"], catalog["sandbox-docker"]["description"]),
            "detail": (detail["title"], [p["title"] for p in detail["pages"]]),
            "config": [(f["label"], f["description"]) for f in detail["config_schema"]],
            "user_config": [f["label"] for f in detail["user_config_schema"]],
            "pages": [p["title"] for p in pages if p["plugin_id"] == "greeter"],
            "set": next(s["title"] for s in sets if s["id"] == "greeter-general"),
            "grants": [g["title"] for g in grants if g["plugin_id"] == "greeter"],
        }

    english = await views(admin)
    assert english == {
        "catalog": ("Greeter", "Says hello in the reader's language."),
        "builtin": ("File tools", "Runs each member's commands in a container of their own."),
        "detail": ("Greeter", ["Greetings"]),
        "config": [("Greeting", "What the greeter says first.")],
        "user_config": ["Nickname"],
        "pages": ["Greetings"],
        "set": "Greeter defaults",
        "grants": ["Greeter"],
    }
    await set_locale(admin, "de")
    assert await views(admin) == {
        "catalog": ("Begrüßer", "Grüßt in der Sprache des Lesers."),
        "builtin": ("Datei-Werkzeuge", "Führt die Befehle jedes Mitglieds in einem eigenen Container aus."),
        "detail": ("Begrüßer", ["Grüße"]),
        "config": [("Gruß", "Was der Begrüßer zuerst sagt.")],
        "user_config": ["Spitzname"],
        "pages": ["Grüße"],
        "set": "Voreinstellungen des Begrüßers",
        "grants": ["Begrüßer"],
    }
    # A member's own choice wins; without one, the instance's language (English here).
    assert [p["title"] for p in (await ok(await bob.get("/api/plugins/pages")))["pages"]] == ["Greetings"]


async def test_a_plugin_without_translations_shows_what_it_declared(skald):
    from .support import Routed
    from skald_hookspecs.types import WebPage

    host = await skald.start(plugins=[Routed("plain", pages=(WebPage("main", "Plain page", "page.js"),))], enable=["plain"])
    admin = await host.admin()
    await set_locale(admin, "de")
    assert [p["title"] for p in (await ok(await admin.get("/api/plugins/pages")))["pages"]] == ["Plain page"]
    catalog = {p["id"]: p for p in (await ok(await admin.get("/api/admin/plugins")))["plugins"]}
    assert catalog["plain"]["title"] == "Plain"
