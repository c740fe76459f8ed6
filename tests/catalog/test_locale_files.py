"""UI strings live in per-locale JSON files; ``I18nBundle.from_folder`` reads them."""

from __future__ import annotations

import json

import pytest

from skald_host.builtins.strings import LOCALES
from skald_hookspecs import I18nBundle


def test_the_hosts_strings_are_one_json_file_per_locale_with_the_same_keys():
    bundle = I18nBundle.from_folder("core", LOCALES)
    assert {"en", "de"} <= set(bundle.strings)
    english = bundle.strings["en"]
    assert len(english) > 400
    for locale, table in bundle.strings.items():
        assert sorted(set(english) - set(table)) == [], f"{locale}.json lacks keys"
        assert sorted(set(table) - set(english)) == [], f"{locale}.json has keys en.json lacks"
    assert bundle.strings["de"]["login.title"] == "Anmelden"


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
