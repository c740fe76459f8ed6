"""UI strings live in per-locale JSON files; ``I18nBundle.from_folder`` reads them."""

from __future__ import annotations

import json

import pytest

from skald_host.builtins.strings import LOCALES
from skald_hookspecs import I18nBundle


PLURAL_CATEGORIES = ("zero", "one", "two", "few", "many", "other")  # CLDR's


def locale_file_problems(strings: dict[str, dict[str, str]]) -> list[str]:
    """What the host's locale files break of what a language really needs: English and
    German complete and alike; any other language a part of English (a key it lacks
    falls back to English), plus its own name (``locale.<code>``, in its own file alone)
    and the CLDR plural forms of keys English has plural forms of (Arabic's
    ``<key>.zero/.two/.few/.many`` where English has ``<key>.one`` / ``.other``)."""
    english = strings["en"]
    problems = []
    for locale, table in sorted(strings.items()):
        if locale in ("en", "de"):
            problems += [f"{locale}.json lacks {key}" for key in sorted(set(english) - set(table))]
            problems += [f"{locale}.json has {key}, which en.json lacks" for key in sorted(set(table) - set(english))]
            continue
        for key in sorted(set(table) - set(english) - {f"locale.{locale}"}):
            base, _, category = key.rpartition(".")
            if not (category in PLURAL_CATEGORIES and (f"{base}.one" in english or f"{base}.other" in english)):
                problems.append(f"{locale}.json has {key}, which en.json lacks")
    return problems


def test_the_hosts_strings_are_one_json_file_per_locale_english_and_german_complete():
    bundle = I18nBundle.from_folder("core", LOCALES)
    assert {"en", "de"} <= set(bundle.strings)
    english = bundle.strings["en"]
    assert len(english) > 400
    assert locale_file_problems(bundle.strings) == []
    assert bundle.strings["de"]["login.title"] == "Anmelden"
    # The shell names a language by its own file's `locale.<code>` (web/lib/i18n.js
    # localeName): English and German name themselves.
    assert english["locale.en"] == "English" and bundle.strings["de"]["locale.de"] == "Deutsch"


def test_a_third_language_may_be_partial_name_itself_and_have_more_plural_forms(tmp_path):
    """Adding a language is adding a file: a partial one (the rest reads in English),
    naming itself, with the plural forms its language has, passes; a key English does
    not have, or German missing one, does not."""
    folder = tmp_path / "locales"
    folder.mkdir()
    for source in LOCALES.iterdir():
        if source.name.endswith(".json"):
            (folder / source.name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "fr.json").write_text(json.dumps({"locale.fr": "Français", "login.title": "Connexion"}), encoding="utf-8")
    (folder / "ar.json").write_text(json.dumps({
        "locale.ar": "العربية", **{f"chat.search_found.{c}": "{count}" for c in PLURAL_CATEGORIES},
    }), encoding="utf-8")
    bundle = I18nBundle.from_folder("core", folder)
    assert locale_file_problems(bundle.strings) == []

    # The shell's language pickers read the third language's name from its own file.
    from skald_host.core.i18n import Strings

    table = Strings([bundle]).table("de")
    assert (table["core.locale.fr"], table["core.locale.ar"], table["core.locale.de"]) == ("Français", "العربية", "Deutsch")

    (folder / "fr.json").write_text(json.dumps({"locale.fr": "Français", "login.titel": "Connexion", "chat.search_found.few": "x"}), encoding="utf-8")
    german = json.loads((folder / "de.json").read_text(encoding="utf-8"))
    del german["login.title"]
    (folder / "de.json").write_text(json.dumps(german), encoding="utf-8")
    assert locale_file_problems(I18nBundle.from_folder("core", folder).strings) == [
        "de.json lacks login.title", "fr.json has login.titel, which en.json lacks",
    ]


def test_a_plural_form_english_lacks_is_no_english_gap_and_a_partial_locales_gaps_are_listed():
    from skald_host.core.i18n import Strings

    strings = Strings([I18nBundle("core", {
        "en": {"locale.en": "English", "locale.de": "Deutsch", "chat.search_found.one": "{count} found", "chat.search_found.other": "{count} found", "login.title": "Sign in"},
        "de": {"locale.en": "English", "locale.de": "Deutsch", "chat.search_found.one": "{count}", "chat.search_found.other": "{count}", "login.title": "Anmelden"},
        "ar": {
            "locale.ar": "العربية", "chat.search_found.other": "{count}",
            **{f"chat.search_found.{c}": "{count}" for c in ("zero", "two", "few", "many")}, "chat.only_ar": "?",
        },
    })])
    missing = strings.missing()
    # English is told of the key only Arabic has, not of Arabic's plural forms.
    assert missing["en"] == ["core.chat.only_ar"]
    # Arabic's real gaps; another language's own name lives in that language's file.
    assert missing["ar"] == ["core.chat.search_found.one", "core.login.title"]
    assert "de" not in missing


def test_a_folder_of_locale_files_becomes_a_bundle(tmp_path):
    (tmp_path / "en.json").write_text(json.dumps({"hello": "Hello"}), encoding="utf-8")
    (tmp_path / "pt-BR.json").write_text(json.dumps({"hello": "Olá"}), encoding="utf-8")
    (tmp_path / "README.txt").write_text("not a locale", encoding="utf-8")
    bundle = I18nBundle.from_folder("hello", tmp_path)
    assert bundle == I18nBundle("hello", {"en": {"hello": "Hello"}, "pt-BR": {"hello": "Olá"}})
    assert I18nBundle.from_folder("hello", str(tmp_path)) == bundle


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("de.json", "{not json", "de.json: not valid JSON"),
        ("de.json", json.dumps(["a list"]), "de.json: must be one JSON object"),
        ("de.json", json.dumps({"count": 3}), "de.json: must be one JSON object"),
        ("German.json", json.dumps({}), "German.json: the file name must be a locale code"),
    ],
)
def test_a_bad_locale_file_is_named_in_the_error(tmp_path, name, content, message):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        I18nBundle.from_folder("hello", tmp_path)


def test_the_icon_names_are_documented_drawn_and_vendored_with_their_licence():
    import re
    from pathlib import Path

    from skald_hookspecs import ICONS

    root = Path(__file__).resolve().parents[2]
    shell = re.search(r"export const ICONS = \[(.*?)\];", (root / "web/lib/icons.js").read_text(encoding="utf-8"), re.S)
    assert shell is not None
    assert tuple(re.findall(r'"([a-z]+)"', shell.group(1))) == ICONS
    vendored = root / "web/vendor/lucide"
    assert sorted(p.stem for p in vendored.glob("*.svg")) == sorted(ICONS)
    assert "ISC License" in (vendored / "LICENSE").read_text(encoding="utf-8")
    for name in ICONS:
        assert "<svg" in (vendored / f"{name}.svg").read_text(encoding="utf-8"), name
    docs = (root / "docs/plugins.md").read_text(encoding="utf-8")
    section = docs[docs.index("**Icons.**"):]
    assert [name for name in ICONS if f"`{name}`" not in section] == []
    # Every icon the host's own plugins name is one the shell draws.
    used = set(re.findall(r'icon="([a-z]+)"', "".join(p.read_text(encoding="utf-8") for p in (root / "skald_host/builtins").glob("*.py"))))
    assert used and used <= set(ICONS)
