"""Every string the Connectors page shows or the API answers: one flat JSON file per
language in ``locales/`` (``en.json``, ``de.json``), which translators edit with
ordinary tools; adding a language is adding a file there. Keys become ``mcp.<key>`` in
the host's merged table; a key a language lacks falls back to English. Values use
``str.format`` fields."""

from __future__ import annotations

from importlib.resources import files
from typing import Mapping

from skald_hookspecs import I18nBundle

STRINGS: Mapping[str, Mapping[str, str]] = I18nBundle.from_folder("mcp", files(__package__) / "locales").strings

#: The keys the page needs (sent with /mine in the caller's language).
PAGE_KEYS = tuple(k for k in STRINGS["en"] if not k.startswith("err_"))
