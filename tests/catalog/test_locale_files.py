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
