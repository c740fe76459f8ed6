"""UI strings merged from every plugin's bundles, by domain.

Keys are ``domain.key``; a key a locale lacks falls back to English, and the gaps are
listed so the admin status page can show which translations are missing.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from skald_hookspecs.types import I18nBundle

FALLBACK_LOCALE = "en"


class Strings:
    def __init__(self, bundles: Iterable[I18nBundle] = ()) -> None:
        self._table: dict[str, dict[str, str]] = {}
        for bundle in bundles:
            self.add(bundle)

    def add(self, bundle: I18nBundle) -> None:
        for locale, strings in bundle.strings.items():
            target = self._table.setdefault(locale, {})
            for key, text in strings.items():
                target[f"{bundle.domain}.{key}"] = text

    @property
    def locales(self) -> list[str]:
        return sorted(self._table)

    def table(self, locale: str | None) -> dict[str, str]:
        """The whole string table for a locale, English underneath."""
        merged = dict(self._table.get(FALLBACK_LOCALE, {}))
        if locale and locale != FALLBACK_LOCALE:
            merged.update(self._table.get(locale, {}))
        return merged

    def translate(self, key: str, locale: str | None = None, **values: Any) -> str:
        text = self._table.get(locale or FALLBACK_LOCALE, {}).get(key)
        if text is None:
            text = self._table.get(FALLBACK_LOCALE, {}).get(key, key)
        try:
            return text.format(**values) if values else text
        except (KeyError, IndexError, ValueError):
            return text

    def missing(self) -> Mapping[str, list[str]]:
        english = set(self._table.get(FALLBACK_LOCALE, {}))
        return {
            locale: sorted(english - set(strings))
            for locale, strings in sorted(self._table.items())
            if locale != FALLBACK_LOCALE and english - set(strings)
        }
