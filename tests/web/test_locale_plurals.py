"""No interface text writes its plural as "(s)": "1 Mitglied(er)", "Gerät(en) oder
Browser(n)", "1 rule(s)" (German-member probe). A text that counts comes in forms
(``<key>.one`` / ``<key>.other``, picked by the shell's ``Intl.PluralRules``; see
skald_host/builtins/locales/README.md). "http(s)" is no plural."""

from __future__ import annotations

import json
import re

from skald_host.builtins.strings import LOCALES

#: A word with a bracketed plural ending: "member(s)", "Mitglied(er)", "Regel(n)", "Text(e)".
BRACKETED_PLURAL = re.compile(r"(?<=\w)\((?:s|es|e|n|en|er)\)", re.IGNORECASE)
NOT_A_PLURAL = re.compile(r"\bhttps?\(s\)", re.IGNORECASE)


def bracketed_plurals(locale: str) -> dict[str, str]:
    strings = json.loads((LOCALES / f"{locale}.json").read_text(encoding="utf-8"))
    return {key: text for key, text in strings.items() if BRACKETED_PLURAL.search(NOT_A_PLURAL.sub("", text))}


def test_no_english_or_german_text_writes_its_plural_in_brackets():
    for locale in ("en", "de"):
        assert bracketed_plurals(locale) == {}, f"{locale}.json: use .one/.other forms"


def test_the_check_sees_a_bracketed_plural_and_lets_http_s_be():
    for text in ("{count} member(s)", "{count} Mitglied(er)", "Auf {count} Gerät(en) oder Browser(n)", "{count} Text(e)"):
        assert BRACKETED_PLURAL.search(NOT_A_PLURAL.sub("", text)), text
    assert not BRACKETED_PLURAL.search(NOT_A_PLURAL.sub("", "must be an http(s) URL (or none)"))


def test_the_counted_texts_of_the_probe_have_one_and_other_forms():
    for locale in ("en", "de"):
        strings = json.loads((LOCALES / f"{locale}.json").read_text(encoding="utf-8"))
        for key in ("projects.member_count", "members.sessions_count", "members.sessions_ended", "status.missing_english",
                    "status.missing_everywhere", "status.missing_translations", "backups.schedule", "approvals.group_rule_count",
                    "approvals.group_delete_rules"):
            assert key not in strings and {f"{key}.one", f"{key}.other"} <= strings.keys(), (locale, key)
