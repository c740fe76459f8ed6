"""Whose strings a plugin may register, and which strings the admin is told are missing.

A plugin's bundle for its own domain is its own; one for a domain that is nobody's
fails the plugin, enabled or not. One for another plugin's domain may only add a
language that plugin lacks altogether, and one for ``core`` may add a language but
never replace the core's words or make up a built-in's: such strings are dropped, and
the log names the plugin. What a plugin adds to ``core`` or another plugin's domain
counts only while it is enabled. A ``NotReady`` key no bundle has is listed among the
missing translations."""

from __future__ import annotations

import logging
from typing import Callable

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle, NotReady

from .support import Routed, catalog_entry, set_enabled


class Bundled(Routed):
    def __init__(self, plugin_id: str, *bundles: I18nBundle) -> None:
        super().__init__(plugin_id)
        self.bundles = bundles

    @hookimpl
    def register_i18n(self, register: Callable[..., None]) -> None:
        for bundle in self.bundles:
            register(bundle)


async def test_a_bundle_for_a_domain_that_is_nobodys_fails_the_plugin_and_another_plugins_words_stay(skald, caplog):
    caplog.set_level(logging.WARNING)
    jotter = Bundled("jotter", I18nBundle("jotter", {"en": {"plugin.title": "Jotter"}}))
    impostor = Bundled("impostor", I18nBundle("impostor", {"en": {"hello": "Hi"}}), I18nBundle("jotter", {"en": {"plugin.title": "SPOOFED"}}))
    squatter = Bundled("squatter", I18nBundle("future-plugin", {"en": {"plugin.title": "Mine now"}}))
    host = await skald.start(plugins=[jotter, impostor, squatter], enable=["jotter", "impostor"])
    admin = await host.admin()

    squatted = await catalog_entry(admin, "squatter")
    assert squatted["state"] == "failed" and squatted["error"] == (
        "register_i18n: bundle domain 'future-plugin' is not this plugin's id nor an installed plugin's: a plugin"
        " registers its strings under its own id (I18nBundle('squatter', ...)), and may add a language to the host's"
        " with the domain 'core' or to another installed plugin's with that plugin's id"
    )
    assert (await catalog_entry(admin, "impostor"))["state"] == "loaded"  # its English for jotter is dropped, not fatal
    assert (await catalog_entry(admin, "jotter"))["title"] == "Jotter"
    strings = (await admin.get("/api/i18n", params={"locale": "en"})).json()["strings"]
    assert strings["jotter.plugin.title"] == "Jotter" and "future-plugin.plugin.title" not in strings
    [warning] = [r.getMessage() for r in caplog.records if "'jotter' bundle dropped" in r.getMessage()]
    assert warning.startswith("plugin impostor: 1 string(s) of its 'jotter' bundle dropped") and "en/plugin.title" in warning
    assert (await host.client().get("/health")).json() == {"status": "ok"}


async def test_a_core_bundle_adds_a_language_but_never_replaces_the_cores_strings(skald, caplog):
    caplog.set_level(logging.WARNING)
    linguist = Bundled(
        "linguist",
        I18nBundle(
            "core",
            {
                "en": {"error.config_required": "SPOOFED", "builtin.jotter.plugin.title": "SPOOFED JOTTER"},
                "de": {"nav.chat": "GEFÄLSCHT"},
                "fr": {"locale.fr": "Français", "nav.chat": "Discussion", "builtin.strings.plugin.title": "Langue de l'interface"},
            },
        ),
    )
    host = await skald.start(plugins=[Routed("jotter"), linguist], enable=["jotter", "linguist"])
    admin = await host.admin()

    assert (await catalog_entry(admin, "linguist"))["state"] == "loaded"  # not failed: it added a language
    english = (await admin.get("/api/i18n", params={"locale": "en"})).json()["strings"]
    german = (await admin.get("/api/i18n", params={"locale": "de"})).json()["strings"]
    french = (await admin.get("/api/i18n", params={"locale": "fr"})).json()["strings"]
    assert english["core.error.config_required"] == "is required"
    assert german["core.nav.chat"] != "GEFÄLSCHT"
    assert (french["core.nav.chat"], french["core.locale.fr"]) == ("Discussion", "Français")
    assert french["core.builtin.strings.plugin.title"] == "Langue de l'interface"  # a translation of a built-in's title
    assert (await catalog_entry(admin, "jotter"))["title"] == "Jotter"  # no title made up for another plugin

    [warning] = [r.getMessage() for r in caplog.records if "'core' bundle dropped" in r.getMessage()]
    assert warning.startswith("plugin linguist: 3 string(s) of its 'core' bundle dropped")
    assert "en/error.config_required" in warning and "en/builtin.jotter.plugin.title" in warning and "de/nav.chat" in warning


FRENCH_CORE = I18nBundle("core", {"fr": {"locale.fr": "Français", "nav.chat": "Discussion"}})


async def test_a_language_plugin_offers_its_language_only_while_it_is_enabled(skald):
    """frlang probe: a translation plugin installed but never enabled (or disabled, and
    the server restarted) still offered French with its words, and the admin could turn
    French off only by uninstalling it. Its own title stays translated on its card."""
    frlang = Bundled("frlang", FRENCH_CORE, I18nBundle("frlang", {"en": {"plugin.title": "French"}, "de": {"plugin.title": "Französisch"}}))
    host = await skald.start(plugins=[frlang])  # installed, never enabled
    admin = await host.admin()

    async def offered() -> tuple[list[str], str, str]:
        answer = (await admin.get("/api/i18n", params={"locale": "fr"})).json()
        return answer["locales"], answer["locale"], answer["strings"]["core.nav.chat"]

    english_chat = (await admin.get("/api/i18n", params={"locale": "en"})).json()["strings"]["core.nav.chat"]
    assert await offered() == (["de", "en"], "en", english_chat)  # a reader asking for French reads English
    assert (await admin.put("/api/me/locale", json={"locale": "fr"})).status_code == 400

    await set_enabled(admin, "frlang", True)  # no restart
    assert await offered() == (["de", "en", "fr"], "fr", "Discussion")

    await set_enabled(admin, "frlang", False)
    assert await offered() == (["de", "en"], "en", english_chat)
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    assert (await catalog_entry(admin, "frlang"))["title"] == "Französisch"  # its own domain counts while disabled


async def test_a_plugin_adds_a_language_another_plugin_lacks_but_never_replaces_its_words(skald, caplog):
    """A translation plugin could not translate the built-ins (``bundle domain 'telegram'
    belongs to the plugin 'telegram'``). It may add a language the owner has not at all,
    while it is enabled; a language the owner has and a key without the owner's English
    are dropped, and the log names the plugin."""
    caplog.set_level(logging.WARNING)
    notes = Bundled("notes", I18nBundle("notes", {"en": {"plugin.title": "Notes", "saved": "Saved"}, "de": {"plugin.title": "Notizen"}}))
    jotter = Bundled("jotter", I18nBundle("jotter", {"en": {"plugin.title": "Jotter"}, "fr": {"plugin.title": "Carnet"}}))
    translator = Bundled(
        "translator",
        FRENCH_CORE,
        I18nBundle("notes", {"fr": {"plugin.title": "Notes (fr)", "saved": "Enregistré", "invented": "Inventé"}, "de": {"saved": "GEFÄLSCHT"}}),
        I18nBundle("jotter", {"fr": {"plugin.title": "FAUX"}}),
    )
    host = await skald.start(plugins=[notes, jotter, translator], enable=["notes", "jotter"])
    admin = await host.admin()

    async def french() -> dict[str, str]:
        return (await admin.get("/api/i18n", params={"locale": "fr"})).json()["strings"]

    assert (await french())["notes.saved"] == "Saved"  # disabled: it adds nothing
    await set_enabled(admin, "translator", True)
    assert (await catalog_entry(admin, "translator"))["state"] == "loaded"
    strings = await french()
    assert (strings["notes.plugin.title"], strings["notes.saved"]) == ("Notes (fr)", "Enregistré")
    assert "notes.invented" not in strings  # the owner has no English for it
    assert strings["jotter.plugin.title"] == "Carnet"  # the owner's French stays
    german = (await admin.get("/api/i18n", params={"locale": "de"})).json()["strings"]
    assert german["notes.saved"] == "Saved"  # German is the owner's language: its gap is not filled by another
    assert (await admin.put("/api/me/locale", json={"locale": "fr"})).status_code == 200
    assert (await catalog_entry(admin, "notes"))["title"] == "Notes (fr)"

    dropped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("plugin translator:")]
    assert any("'notes' bundle dropped" in m and "fr/invented" in m and "de/saved" in m for m in dropped), dropped
    assert any("'jotter' bundle dropped" in m and "fr/plugin.title" in m for m in dropped), dropped

    assert (await admin.put("/api/me/locale", json={"locale": "en"})).status_code == 200
    await set_enabled(admin, "translator", False)
    assert (await french())["notes.saved"] == "Saved"


class NotReadyYet(Routed):
    def __init__(self, plugin_id: str, *bundles: I18nBundle) -> None:
        super().__init__(plugin_id)
        self.bundles = bundles

    @hookimpl
    def register_i18n(self, register: Callable[..., None]) -> None:
        for bundle in self.bundles:
            register(bundle)

    @hookimpl
    async def startup(self, host) -> None:
        raise NotReady("no token is set", key="error.no_token")


async def test_a_not_ready_key_no_bundle_has_is_listed_as_a_missing_translation(skald):
    translated = I18nBundle("ready-soon", {"en": {"error.no_token": "Set a token first."}})
    host = await skald.start(plugins=[NotReadyYet("untranslated"), NotReadyYet("ready-soon", translated)], enable=["untranslated", "ready-soon"])
    admin = await host.admin()

    status = (await admin.get("/api/admin/status")).json()
    assert "untranslated.error.no_token" in status["missing_translations"]["en"]
    assert "ready-soon.error.no_token" not in status["missing_translations"].get("en", [])
    assert (await catalog_entry(admin, "untranslated"))["error"] == "startup: no token is set"  # English, as documented
    assert (await catalog_entry(admin, "ready-soon"))["error"] == "Set a token first."


async def test_a_key_no_language_has_is_told_apart_from_one_only_english_lacks(skald):
    """A ``NotReady`` key no bundle has is missing in every language: every reader sees
    the plugin's own message, so the status lists it as such (``missing_everywhere``),
    not as a text \"only in other languages\". It stays under ``missing_translations``
    [\"en\"] as before; a key only German has is missing in English alone."""
    german_only = I18nBundle("german-only", {"en": {"plugin.title": "German only"}, "de": {"error.no_token": "Erst ein Token setzen."}})
    host = await skald.start(plugins=[NotReadyYet("untranslated"), NotReadyYet("german-only", german_only)], enable=["untranslated", "german-only"])
    admin = await host.admin()

    status = (await admin.get("/api/admin/status")).json()
    assert {"untranslated.error.no_token", "german-only.error.no_token"} <= set(status["missing_translations"]["en"])
    assert "untranslated.error.no_token" in status["missing_everywhere"]
    assert "german-only.error.no_token" not in status["missing_everywhere"]
    assert set(status["missing_everywhere"]) <= set(status["missing_translations"]["en"])


async def test_the_status_warning_about_a_plugin_reads_whole_in_the_admins_language(skald):
    """The warning's own words came in English around a German reason (newcomer
    probe: "The plugin Telegram is not working: Telegram hat das Bot-Token abgelehnt")."""
    translated = I18nBundle("ready-soon", {"en": {"error.no_token": "Set a token first."}, "de": {"error.no_token": "Erst ein Token setzen."}})
    host = await skald.start(plugins=[NotReadyYet("ready-soon", translated)], enable=["ready-soon"])
    admin = await host.admin()
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200

    warnings = (await admin.get("/api/admin/status")).json()["warnings"]
    texts = [w["text"] for w in warnings if w["id"] == "plugin_waiting"]  # waiting for the admin, not broken
    assert texts == ["Das Plugin Ready-Soon wartet, bevor es startet (seine Karte im Katalog sagt mehr): Erst ein Token setzen."], texts


async def test_the_status_warning_ends_with_the_error_whatever_the_error_ends_with(skald):
    """A plugin's error has no closing full stop (\"startup: no token is set\"): put before
    the warning's last sentence, it read as a run-on one. The error comes last."""
    host = await skald.start(plugins=[NotReadyYet("untranslated")], enable=["untranslated"])
    admin = await host.admin()

    warnings = (await admin.get("/api/admin/status")).json()["warnings"]
    texts = [w["text"] for w in warnings if w["id"] == "plugin_waiting"]
    assert texts == ["The plugin Untranslated is waiting before it starts (its card in the catalog says more): startup: no token is set"], texts


async def test_a_plugin_waiting_for_a_setting_is_a_warning_in_the_log_not_an_error(skald, caplog):
    """NotReady is a state the admin resolves (a token to set), said on the card: an
    ERROR line at every start read like a crash (upgrade probe: "no error in the log")."""
    import logging

    caplog.set_level(logging.WARNING)
    await skald.start(plugins=[NotReadyYet("ready-soon")], enable=["ready-soon"])
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if "ready-soon" in r.getMessage()]
    assert (logging.WARNING, "plugin ready-soon is not ready: startup: no token is set") in lines
    assert not [line for level, line in lines if level >= logging.ERROR], lines


class CrashingStartup(Routed):
    @hookimpl
    async def startup(self, host) -> None:
        raise RuntimeError("cannot reach the widget service")


async def test_a_not_ready_plugins_page_shows_its_message_and_no_traceback(skald):
    """NotReady is the documented "not configured yet": the admin's plugin page says the
    message in their language, without a traceback that reads like a crash. A real crash
    at startup keeps its traceback there."""
    translated = I18nBundle("ready-soon", {"en": {"error.no_token": "Set a token first."}, "de": {"error.no_token": "Erst ein Token setzen."}})
    host = await skald.start(plugins=[NotReadyYet("ready-soon", translated), CrashingStartup("crashing")], enable=["ready-soon", "crashing"])
    admin = await host.admin()

    detail = (await admin.get("/api/admin/plugins/ready-soon")).json()
    assert (detail["healthy"], detail["error"], detail["traceback"]) == (False, "Set a token first.", None)
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    assert (await admin.get("/api/admin/plugins/ready-soon")).json()["error"] == "Erst ein Token setzen."

    crashed = (await admin.get("/api/admin/plugins/crashing")).json()
    assert crashed["error"] == "startup: RuntimeError: cannot reach the widget service"
    assert "RuntimeError: cannot reach the widget service" in crashed["traceback"]


class SlowStartup(Routed):
    @hookimpl
    async def startup(self, host) -> None:
        import asyncio

        await asyncio.sleep(30)


async def test_a_startup_that_timed_out_is_said_on_the_card_in_the_readers_language(skald):
    host = await skald.start(plugins=[SlowStartup("slow")], enable=["slow"], settings=skald.settings(plugins={"hook_timeout_seconds": 0.3}))
    admin = await host.admin()
    assert (await catalog_entry(admin, "slow"))["error"].startswith("Its startup did not finish within 0.3 s.")

    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200

    assert (await catalog_entry(admin, "slow"))["error"].startswith("Sein Start wurde nicht innerhalb von 0.3 s fertig.")
    assert host.core.plugins.status("slow").error == "startup did not finish within 0.3 s"  # the log's, in English
