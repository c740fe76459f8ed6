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
    """A Telegram user's ``language_code`` (``de-AT``) as one of our bundle locales."""
    if isinstance(language_code, str) and language_code.lower().startswith("de"):
        return "de"
    return "en"
