"""Every string the bot sends or the pages show: one flat JSON file per language in
``locales/`` (``en.json``, ``de.json``), which translators edit with ordinary tools;
adding a language is adding a file there. Keys become ``telegram.<key>`` in the host's
merged table; a key a language lacks falls back to English. Values use ``str.format``
fields."""

from __future__ import annotations

from importlib.resources import files
from typing import Mapping

from skald_hookspecs import I18nBundle

STRINGS: Mapping[str, Mapping[str, str]] = I18nBundle.from_folder("telegram", files(__package__) / "locales").strings

#: The keys a page needs, sent translated by the page's status route.
PAGE_KEYS = ("page_title", "page_code", "page_link", "page_unlink", "page_done")
ROSTER_KEYS = ("roster_title", "roster_empty", "roster_member", "roster_chat", "roster_since")


def telegram_locale(language_code: object) -> str:
    """A Telegram user's ``language_code`` as one of our bundle locales: the whole tag
    when a file has it (``pt-BR``), else its language (``de-AT`` → ``de``), else English."""
    if isinstance(language_code, str) and language_code.strip():
        by_case = {locale.lower(): locale for locale in STRINGS}
        tag = language_code.strip().replace("_", "-").lower()
        for wanted in (tag, tag.split("-")[0]):
            if wanted in by_case:
                return by_case[wanted]
    return "en"


def plural_category(locale: str | None, count: int) -> str:
    """The CLDR plural category of ``count`` in ``locale`` (``one``, ``few``, ``many``,
    ...: French's 0 is ``one``, Polish's 5 ``many``), by Babel's plural rules, as the web
    shell asks ``Intl.PluralRules``; ``other`` for a locale Babel does not know."""
    from babel import Locale, UnknownLocaleError  # here: the host imports this module at boot

    try:
        return Locale.parse(str(locale or "en").replace("_", "-"), sep="-").plural_form(count)
    except (UnknownLocaleError, ValueError, TypeError):
        return "other"


def size_text(size: int, locale: str | None) -> str:
    """A byte count as the member reads a size, in their number format ("1,5 MiB" in
    German), as the web shell's ``formatSize``: never a raw byte count."""
    from babel.numbers import format_decimal  # here, as plural_category

    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024), ("B", 1)):
        if size >= scale or unit == "B":
            try:
                number = format_decimal(round(size / scale, 1), format="#,##0.#", locale=str(locale or "en").replace("-", "_"))
            except (ValueError, TypeError, LookupError):
                number = f"{size / scale:.1f}".removesuffix(".0")
            return f"{number} {unit}"
    raise AssertionError("unreachable")
